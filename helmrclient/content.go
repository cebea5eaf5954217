package helmrclient

import "github.com/helmr-go/helmr/helmrtype"

// Text returns conversational input with one text part holding s.
func Text(s string) helmrtype.InputContent { return helmrtype.Text(s) }

// TextParts returns conversational input with one text part per string, in
// order; with no strings it is the empty input [].
func TextParts(texts ...string) helmrtype.InputContent {
	c := make(helmrtype.InputContent, 0, len(texts))
	for _, t := range texts {
		c = append(c, helmrtype.ContentPart{Type: helmrtype.PartText, Text: t})
	}
	return c
}
