package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// The OpenAPI document (openapi.json) is generated from the table below and
// the helmrtype wire types (reflection over their json tags, with their Go
// doc comments as descriptions). `go generate ./internal/server` rewrites
// it; TestOpenAPIDocument fails when the committed document differs from
// what the code says: a route, path or query parameter, request or
// response field, or error code missing or extra.

var update = flag.Bool("update", false, "rewrite openapi.json from the code")

// param is a query parameter of a route.
type param struct {
	name, typ, doc string
}

// op describes one route for the document.
type op struct {
	summary string
	req     any // a value of the request body's type; nil for none
	// optionalBody: the body may be left out.
	optionalBody bool
	resp         any // a value of the 2xx response's type
	status       int
	query        []param
	// sse: the route also streams text/event-stream (Accept header or follow=true).
	sse       bool
	multipart bool
	// security: "" API key; "none"; "token" (API key or the Token's credential).
	security string
}

var (
	qLimit  = param{"limit", "integer", "page size, 1–100 (the timeline: 1–1000, default 100)"}
	qCursor = param{"cursor", "string", "opaque cursor from the previous page's next_cursor"}
	qWait   = param{"timeout", "string", "how long to wait: a Duration (\"30s\") or milliseconds; at most 60s"}
	qSettle = param{"wait", "string", "also wait up to this long (as the timeout of …/wait; at most 60s) for the admitted Turn to settle, and answer it settled"}
)

// ops is every /v1 route; TestOpenAPIDocument checks it against the router.
var ops = map[string]op{
	"POST /v1/sessions": {summary: "Create a Session (and admit its first Turn when input is given)",
		req: helmrtype.SessionCreateRequest{}, resp: helmrtype.SessionCreateReceipt{}, status: 201, query: []param{qSettle}},
	"GET /v1/sessions": {summary: "List Sessions", resp: helmrtype.SessionPage{}, query: []param{
		{"agent", "string", "only Sessions of this Agent"}, {"key", "string", "only the Session with this key"},
		{"status", "string", "only these statuses (comma-separated or repeated)"},
		{"parent_session_id", "string", "only children of this Session"}, {"requester_session_id", "string", "only Sessions this Session requested"},
		qCursor, qLimit}},
	"GET /v1/sessions/{id}":                           {summary: "Get a Session", resp: helmrtype.Session{}},
	"POST /v1/sessions/{id}/turns":                    {summary: "Enqueue a Turn", req: helmrtype.EnqueueRequest{}, resp: helmrtype.TurnState{}, status: 201, query: []param{qSettle}},
	"GET /v1/sessions/{id}/turns":                     {summary: "List a Session's Turns", resp: helmrtype.TurnPage{}, query: []param{qCursor, qLimit}},
	"GET /v1/sessions/{id}/turns/{turn_id}":           {summary: "Get a Turn", resp: helmrtype.TurnState{}},
	"GET /v1/sessions/{id}/turns/{turn_id}/wait":      {summary: "Wait for a Turn to settle", resp: helmrtype.TimedTurnWaitResult{}, query: []param{qWait}},
	"POST /v1/sessions/{id}/turns/{turn_id}/messages": {summary: "Send a message to a running Turn", req: helmrtype.MessageRequest{}, resp: helmrtype.MessageReceipt{}, status: 202},
	"POST /v1/sessions/{id}/turns/{turn_id}/interrupt": {summary: "Interrupt a Turn", req: helmrtype.ControlRequest{}, optionalBody: true,
		resp: helmrtype.TurnInterruptReceipt{}, status: 202},
	"GET /v1/sessions/{id}/events": {summary: "Read a Session's timeline, or follow it over SSE (Accept: text/event-stream, Last-Event-ID)",
		resp: helmrtype.SessionEventPage{}, sse: true, query: []param{{"after", "integer", "only events with a sequence above this"}, qLimit}},
	"GET /v1/agents":                    {summary: "List Agents", resp: helmrtype.AgentPage{}, query: []param{{"deployment_id", "string", "the Agents of this Deployment (default the current one)"}, qCursor, qLimit}},
	"GET /v1/agents/{id}":               {summary: "Get an Agent", resp: helmrtype.AgentInfo{}, query: []param{{"deployment_id", "string", "the Agent in this Deployment (default the current one)"}}},
	"GET /v1/deployments":               {summary: "List Deployments", resp: helmrtype.DeploymentPage{}, query: []param{qCursor, qLimit}},
	"GET /v1/deployments/{id}":          {summary: "Get a Deployment", resp: helmrtype.Deployment{}},
	"POST /v1/deployments/{id}/promote": {summary: "Make an earlier Deployment current again", resp: helmrtype.Deployment{}},
	"POST /v1/deployments": {summary: "Upload a Deployment (multipart: binary, optional manifest and sources)",
		resp: helmrtype.Deployment{}, status: 201, multipart: true},
	"GET /v1/schedules":                                            {summary: "List Schedules", resp: helmrtype.SchedulePage{}, query: []param{qCursor, qLimit}},
	"GET /v1/schedules/{id}":                                       {summary: "Get a Schedule", resp: helmrtype.Schedule{}},
	"GET /v1/sessions/{id}/turns/{turn_id}/asks":                   {summary: "List a Turn's questions", resp: helmrtype.AskPage{}, query: []param{qCursor, qLimit}},
	"GET /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}":          {summary: "Get a question", resp: helmrtype.AskState{}},
	"POST /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}/respond": {summary: "Answer a question", req: helmrtype.AskRespond{}, resp: helmrtype.AskState{}},
	"GET /v1/tokens":                                               {summary: "List Tokens across Sessions (the inbox), newest first", resp: helmrtype.TokenPage{}, query: []param{{"status", "string", "pending, completed, cancelled or expired; every status when left out"}, qCursor, qLimit}},
	"GET /v1/tokens/{id}":                                          {summary: "Get a Token", resp: helmrtype.TokenState{}},
	"POST /v1/keys":                                                {summary: "Create an API key with a role (its secret is shown this once)", req: helmrtype.APIKeyCreateRequest{}, resp: helmrtype.APIKeyCreated{}, status: 201},
	"GET /v1/keys":                                                 {summary: "List API keys (no secrets)", resp: helmrtype.APIKeyPage{}, query: []param{qCursor, qLimit}},
	"DELETE /v1/keys/{id}":                                         {summary: "Revoke an API key", resp: helmrtype.APIKey{}},
	"POST /v1/slack/apps": {summary: "Connect a Slack app (credentials checked with Slack, sealed at rest, never returned)",
		req: helmrtype.SlackAppConnect{}, resp: helmrtype.SlackApp{}, status: 201},
	"GET /v1/slack/apps":         {summary: "List the connected Slack apps (without credentials)", resp: helmrtype.SlackAppList{}},
	"DELETE /v1/slack/apps/{id}": {summary: "Disconnect a Slack app and drop its credentials", resp: helmrtype.SlackApp{}},
	"POST /v1/slack/users": {summary: "Map a Slack user to a responder identity and role (responder or above answers questions from Slack)",
		req: helmrtype.SlackUserMapping{}, resp: helmrtype.SlackUserMapping{}},
	"GET /v1/slack/users": {summary: "List the Slack user mappings", resp: helmrtype.SlackUserList{},
		query: []param{{"team_id", "string", "only this workspace's mappings"}}},
	"DELETE /v1/slack/users/{team_id}/{user_id}": {summary: "Remove a Slack user's mapping", resp: helmrtype.SlackUserMapping{}},
	"GET /v1/asks":          {summary: "List questions across Sessions (the inbox), newest first", resp: helmrtype.AskPage{}, query: []param{{"status", "string", "pending, responded or cancelled; every status when left out"}, qCursor, qLimit}},
	"GET /v1/asks/{ask_id}": {summary: "Get a question by its ID alone", resp: helmrtype.AskState{}},
	"POST /v1/tokens/{id}/complete": {summary: "Complete a Token (with an API key or the Token's access credential)",
		req: helmrtype.TokenComplete{}, optionalBody: true, resp: helmrtype.TokenCompletion{}, security: "token"},
	"POST /v1/tokens/{id}/cancel": {summary: "Cancel a Token", req: struct {
		IdempotencyKey string `json:"idempotency_key,omitempty"`
	}{}, optionalBody: true, resp: helmrtype.TokenState{}},
	"POST /v1/sessions/{id}/interrupt": {summary: "Interrupt a Session (places an interrupt hold)", req: helmrtype.ControlRequest{}, optionalBody: true, resp: helmrtype.SessionControlReceipt{}, status: 202},
	"POST /v1/sessions/{id}/resume":    {summary: "Resume a held Session", req: helmrtype.ResumeRequest{}, resp: helmrtype.SessionControlReceipt{}, status: 202},
	"POST /v1/sessions/{id}/close":     {summary: "Close a Session once its queue drains", req: helmrtype.ControlRequest{}, optionalBody: true, resp: helmrtype.SessionStatusReceipt{}, status: 202},
	"POST /v1/sessions/{id}/cancel":    {summary: "Cancel a Session and its queued Turns", req: helmrtype.ControlRequest{}, optionalBody: true, resp: helmrtype.SessionStatusReceipt{}, status: 202},
	"POST /v1/computers":               {summary: "Create a Computer", req: helmrtype.ComputerCreateRequest{}, resp: helmrtype.ComputerState{}, status: 201},
	"GET /v1/computers": {summary: "List Computers, or find one by key", resp: helmrtype.ComputerPage{},
		query: []param{{"key", "string", "only the live Computer with this key"}, qCursor, qLimit}},
	"GET /v1/computers/{id}":           {summary: "Get a Computer", resp: helmrtype.ComputerState{}},
	"DELETE /v1/computers/{id}":        {summary: "Delete a Computer", resp: helmrtype.ComputerState{}},
	"GET /v1/computers/{id}/members":   {summary: "List the Sessions on a Computer", resp: helmrtype.ComputerMemberPage{}, query: []param{qCursor, qLimit}},
	"POST /v1/computers/{id}/commands": {summary: "Run a Command on a Computer", req: helmrtype.CommandRequest{}, resp: helmrtype.CommandState{}, status: 201},
	"GET /v1/commands/{id}":            {summary: "Get a Command", resp: helmrtype.CommandState{}},
	"POST /v1/commands/{id}/cancel":    {summary: "Cancel a Command", req: struct{}{}, optionalBody: true, resp: helmrtype.CommandState{}},
	"GET /v1/commands/{id}/wait":       {summary: "Wait for a Command to end", resp: helmrtype.CommandWaitResult{}, query: []param{qWait}},
	"GET /v1/commands/{id}/logs": {summary: "Read a Command's output, or follow it over SSE (follow=true)", resp: helmrtype.CommandLogPage{}, sse: true,
		query: []param{{"after", "integer", "only records with a sequence above this"}, {"follow", "boolean", "true: stream over SSE until the Command ends"}, qLimit}},
	"GET /v1/openapi.json": {summary: "This document", resp: map[string]any{}, security: "none"},
}

// gen builds schemas from Go types.
type gen struct {
	schemas map[string]any
	docs    map[string]string // "Type" and "Type.Field" → doc comment
}

var rawType = reflect.TypeFor[json.RawMessage]()
var timeType = reflect.TypeFor[time.Time]()

func (g *gen) schema(t reflect.Type) map[string]any {
	switch {
	case t == rawType:
		return map[string]any{"description": "any JSON value"}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name := t.Name()
		if _, ok := g.schemas[name]; !ok {
			g.schemas[name] = nil // a recursive reference finds it
			g.schemas[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic("no schema for " + t.String())
}

// object is a struct's schema: its JSON fields (embedded structs' too).
func (g *gen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	g.fields(t, props)
	s := map[string]any{"type": "object", "properties": props}
	if d := g.docs[t.Name()]; d != "" && t.Name() != "" {
		s["description"] = d
	}
	return s
}

func (g *gen) fields(t reflect.Type, props map[string]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		if d := g.docs[t.Name()+"."+f.Name]; d != "" {
			if _, ref := s["$ref"]; ref {
				s = map[string]any{"$ref": s["$ref"], "description": d}
			} else {
				s["description"] = d
			}
		}
		props[name] = s
	}
}

// typeDocs reads the doc comments of helmrtype's types and fields.
func typeDocs(t testing.TB) map[string]string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../../helmrtype", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	clean := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				gd, ok := n.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					return true
				}
				for _, sp := range gd.Specs {
					ts := sp.(*ast.TypeSpec)
					doc := ts.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					if doc != nil {
						docs[ts.Name.Name] = clean(doc.Text())
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						c := fl.Doc
						if c == nil {
							c = fl.Comment
						}
						for _, nm := range fl.Names {
							if c != nil {
								docs[ts.Name.Name+"."+nm.Name] = clean(c.Text())
							}
						}
					}
				}
				return false
			})
		}
	}
	return docs
}

// errorCodes are the helmrtype.Code constants, read from the source.
func errorCodes(t testing.TB) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../helmrtype/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Code" {
			for _, v := range vs.Values {
				if bl, ok := v.(*ast.BasicLit); ok {
					c, _ := strconv.Unquote(bl.Value)
					codes = append(codes, c)
				}
			}
		}
		return true
	})
	sort.Strings(codes)
	return codes
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// buildDocument is the OpenAPI document the code describes.
func buildDocument(t testing.TB) []byte {
	g := &gen{schemas: map[string]any{}, docs: typeDocs(t)}
	codes := errorCodes(t)
	errSchema := g.schema(reflect.TypeFor[helmrtype.ErrorEnvelope]())
	codeDesc := []string{}
	for _, c := range codes {
		codeDesc = append(codeDesc, c+": HTTP "+strconv.Itoa(helmrtype.HTTPStatus(helmrtype.Code(c))))
	}
	g.schemas["ErrorCode"] = map[string]any{"type": "string", "enum": codes,
		"description": "The stable error codes, each with the HTTP status it is answered with: " + strings.Join(codeDesc, ", ") + "."}
	// The envelope's code is one of them.
	if e, ok := g.schemas["Error"].(map[string]any); ok {
		e["properties"].(map[string]any)["code"] = map[string]any{"$ref": "#/components/schemas/ErrorCode"}
	}
	paths := map[string]map[string]any{}
	for pattern, o := range ops {
		method, p, _ := strings.Cut(pattern, " ")
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range o.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.doc, "schema": map[string]any{"type": q.typ}})
		}
		status := o.status
		if status == 0 {
			status = 200
		}
		content := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(o.resp))}}
		if o.sse {
			content["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string",
				"description": "Server-sent events: each record is one event whose id is its sequence; resume with Last-Event-ID."}}
		}
		responses := map[string]any{strconv.Itoa(status): map[string]any{"description": "OK", "content": content},
			"default": map[string]any{"description": "An error, in the error envelope",
				"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}}
		if status == 201 {
			responses["200"] = map[string]any{"description": "An idempotent replay of an earlier request: the original receipt", "content": content}
		}
		opID := strings.ToLower(method) + strings.NewReplacer("/v1/", "", "/", "_", "{", "", "}", "", ".", "_").Replace(p)
		entry := map[string]any{"summary": o.summary, "operationId": opID, "responses": responses}
		if len(params) > 0 {
			entry["parameters"] = params
		}
		switch {
		case o.multipart:
			entry["requestBody"] = map[string]any{"required": true, "content": map[string]any{"multipart/form-data": map[string]any{
				"schema": map[string]any{"type": "object", "required": []string{"binary"}, "properties": map[string]any{
					"binary":   map[string]any{"type": "string", "contentMediaType": "application/octet-stream", "description": "the agent program: a binary, or a Node bundle"},
					"manifest": map[string]any{"$ref": "#/components/schemas/Manifest", "description": "optional; must equal what the artifact prints; its runtime says how to run it"},
					"sources":  map[string]any{"type": "string", "contentMediaType": "application/x-tar", "description": "the files the Templates' Copy steps read, as a tar archive"},
				}}}}}
			g.schema(reflect.TypeFor[helmrtype.Manifest]())
		case o.req != nil:
			entry["requestBody"] = map[string]any{"required": !o.optionalBody,
				"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(o.req))}}}
		}
		switch o.security {
		case "none":
			entry["security"] = []any{}
		case "token":
			entry["security"] = []any{map[string]any{"apiKey": []any{}}, map[string]any{"tokenCredential": []any{}}}
		}
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		paths[p][strings.ToLower(method)] = entry
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Helmr API", "version": "v1",
			"description": "The Helmr control plane's REST API. JSON is snake_case; every error is the error envelope with a stable code; " +
				"create, enqueue, send and control calls take an idempotency_key. See docs/api.md for the concepts."},
		"servers":  []any{map[string]any{"url": "/"}},
		"security": []any{map[string]any{"apiKey": []any{}}},
		"paths":    paths,
		"components": map[string]any{
			"schemas": g.schemas,
			"securitySchemes": map[string]any{
				"apiKey":          map[string]any{"type": "http", "scheme": "bearer", "description": "An API key (hlmr_sk_…)"},
				"tokenCredential": map[string]any{"type": "http", "scheme": "bearer", "description": "A Token's public access credential (hlmr_tok_…); it completes that Token only"},
			},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// handlerQueries reads, from the handlers' source, the query parameters
// each route's handler reads (r.URL.Query().Get, q.Get, q[…], queryInt).
func handlerQueries(t *testing.T) map[string][]string {
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	funcs := map[string]*ast.FuncDecl{}
	routes := map[string]string{} // pattern → handler method
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			funcs[fd.Name.Name] = fd
			if fd.Name.Name != "routeTable" {
				continue
			}
			ast.Inspect(fd, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				k, _ := strconv.Unquote(kv.Key.(*ast.BasicLit).Value)
				if cl, ok := kv.Value.(*ast.CompositeLit); ok {
					for _, e := range cl.Elts {
						if sel, ok := e.(*ast.SelectorExpr); ok {
							routes[k] = sel.Sel.Name
						}
					}
				}
				return false
			})
		}
	}
	isQuery := func(x ast.Expr) bool {
		if id, ok := x.(*ast.Ident); ok {
			return id.Name == "q"
		}
		c, ok := x.(*ast.CallExpr)
		if !ok {
			return false
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Query"
	}
	lit := func(x ast.Expr) string {
		if bl, ok := x.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			s, _ := strconv.Unquote(bl.Value)
			return s
		}
		return ""
	}
	// reads collects a function's query reads, following calls to other
	// methods of the server that take the request (sessionStatusControl,
	// stream).
	var reads func(name string, seen map[string]bool) []string
	reads = func(name string, seen map[string]bool) []string {
		fd := funcs[name]
		if fd == nil || seen[name] {
			return nil
		}
		seen[name] = true
		var out []string
		ast.Inspect(fd, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "queryInt" && len(x.Args) == 2 {
					out = append(out, lit(x.Args[1]))
				}
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
					if sel.Sel.Name == "Get" && isQuery(sel.X) && len(x.Args) == 1 {
						out = append(out, lit(x.Args[0]))
					}
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "s" {
						out = append(out, reads(sel.Sel.Name, seen)...)
					}
				}
			case *ast.IndexExpr:
				if isQuery(x.X) {
					out = append(out, lit(x.Index))
				}
			}
			return true
		})
		return out
	}
	got := map[string][]string{}
	for pattern, h := range routes {
		q := reads(h, map[string]bool{})
		sort.Strings(q)
		got[pattern] = slices.Compact(q)
	}
	return got
}

// TestOpenAPIDocument: openapi.json is what the code describes, names
// exactly the routes the router serves with the query parameters their
// handlers read and every error code, validates as OpenAPI 3.1, and is
// served without a key at GET /v1/openapi.json.
func TestOpenAPIDocument(t *testing.T) {
	want := buildDocument(t)
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, want) {
		t.Errorf("openapi.json is not what the code describes (a route, parameter, field or error code changed): run go generate ./internal/server")
	}

	// Routes: the router's registered /v1 routes, and the table's.
	st, err := sqlitestore.Open(context.Background(), t.TempDir()+"/helmr.db", sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := New(engine.New(st, engine.Options{}), Options{})
	registered := []string{"GET /v1/openapi.json"}
	for p := range srv.Patterns() {
		if p != "/v1/" {
			registered = append(registered, p)
		}
	}
	var documented []string
	for p := range ops {
		documented = append(documented, p)
	}
	sort.Strings(registered)
	sort.Strings(documented)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not in the document", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(registered, r) {
			t.Errorf("route %s is in the document but not served", r)
		}
	}

	// Query parameters: what each handler reads, and the table's.
	for pattern, q := range handlerQueries(t) {
		var doc []string
		for _, p := range ops[pattern].query {
			doc = append(doc, p.name)
		}
		sort.Strings(doc)
		if !slices.Equal(q, doc) {
			t.Errorf("%s: the handler reads query parameters %q, the document names %q", pattern, q, doc)
		}
	}

	// The loaded document: valid OpenAPI 3.1, each path's parameters as
	// its pattern says, every error code.
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(committed)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.json does not validate: %v", err)
	}
	if d.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", d.OpenAPI)
	}
	for p, item := range d.Paths.Map() {
		for m, o := range item.Operations() {
			var names []string
			for _, pr := range o.Parameters {
				if pr.Value.In == "path" {
					names = append(names, pr.Value.Name)
				}
			}
			var want []string
			for _, mm := range pathParam.FindAllStringSubmatch(p, -1) {
				want = append(want, mm[1])
			}
			if !slices.Equal(names, want) {
				t.Errorf("%s %s: path parameters %q, want %q", m, p, names, want)
			}
		}
	}
	var enum []string
	for _, v := range d.Components.Schemas["ErrorCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	if codes := errorCodes(t); !slices.Equal(enum, codes) {
		t.Errorf("error codes: document %q, helmrtype %q", enum, codes)
	}
	// Every field of a wire type is in its schema, and no other.
	for name, typ := range map[string]reflect.Type{"TurnState": reflect.TypeFor[helmrtype.TurnState](), "Session": reflect.TypeFor[helmrtype.Session](),
		"SessionCreateRequest": reflect.TypeFor[helmrtype.SessionCreateRequest]()} {
		props := map[string]bool{}
		for k := range d.Components.Schemas[name].Value.Properties {
			props[k] = true
		}
		tmp := map[string]any{}
		(&gen{schemas: map[string]any{}}).fields(typ, tmp)
		for k := range tmp {
			if !props[k] {
				t.Errorf("%s: field %s missing from the document", name, k)
			}
			delete(props, k)
		}
		for k := range props {
			t.Errorf("%s: the document has field %s the type has not", name, k)
		}
	}

	// Served without a key.
	hs := httptest.NewServer(srv)
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if *update {
		committed = openAPIDocument // the binary embeds the document it was built with
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, committed) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /v1/openapi.json: %d %s", resp.StatusCode, resp.Header)
	}
}
