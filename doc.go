// Package helmr is the Helmr Agent SDK for Go. An agent program declares
// Templates and Agents and calls Main:
//
//	var repo = helmr.Template(helmr.TemplateSpec{ID: "repo",
//		Image:     helmr.Image("repo").FromHost(),
//		Resources: helmr.Resources{CPU: 1, Memory: "1GiB"}})
//
//	var echo = helmr.Agent(helmr.AgentSpec[helmr.InputContent, any, struct{}]{
//		ID: "echo", Template: repo,
//		Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[struct{}]) (any, error) {
//			return nil, t.Respond(ctx, t.Input.PlainText())
//		}})
//
//	func main() { helmr.Main(echo) }
//
// helmr dev and helmr deploy build the program, read its manifest and run
// one process per Session; package helmrtest runs the same Agents in a test.
package helmr
