package helmrtype

import "time"

// Role is what an API key may do. Roles are ordered: each one may do all
// that the roles below it may, RoleViewer < RoleResponder < RoleOperator <
// RoleAdmin.
type Role string

// The roles of API keys (see docs/api.md for the routes of each).
const (
	// RoleAdmin may do everything, including deploys and API keys.
	RoleAdmin Role = "admin"
	// RoleOperator runs Sessions, Turns, controls, Computers and Commands,
	// but neither deploys nor manages keys.
	RoleOperator Role = "operator"
	// RoleResponder reads, answers questions and completes Tokens.
	RoleResponder Role = "responder"
	// RoleViewer only reads.
	RoleViewer Role = "viewer"
)

// Roles lists every role, lowest first.
var Roles = []Role{RoleViewer, RoleResponder, RoleOperator, RoleAdmin}

// rank orders the roles; 0 is no valid role.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleResponder:
		return 2
	case RoleOperator:
		return 3
	case RoleAdmin:
		return 4
	}
	return 0
}

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether a key with role r may use what needs role need.
func (r Role) Allows(need Role) bool { return r.Valid() && need.Valid() && r.rank() >= need.rank() }

// APIKey is the REST view of an API key: never its secret, but the secret's
// first characters (Prefix) so that a person can tell keys apart.
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      Role       `json:"role"`
	Prefix    string     `json:"prefix,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// APIKeyCreateRequest is the body of POST /v1/keys.
type APIKeyCreateRequest struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// APIKeyCreated answers POST /v1/keys: the key and its secret, which the
// server shows this once and keeps only hashed.
type APIKeyCreated struct {
	APIKey
	Secret string `json:"secret"`
}

// APIKeyPage is one page of API keys, oldest first.
type APIKeyPage struct {
	Keys       []APIKey `json:"keys"`
	NextCursor string   `json:"next_cursor,omitempty"`
}
