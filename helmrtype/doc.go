// Package helmrtype holds the wire types and error codes shared by the Helmr
// SDK, the Go client and the control plane. JSON field names are snake_case,
// as on the REST API.
package helmrtype
