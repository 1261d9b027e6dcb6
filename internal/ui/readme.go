package ui

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// readmeMarkdown renders a module's README (CommonMark with GitHub's
// tables, strikethrough, task lists and autolinks). A README comes from an
// uploaded archive, so it is untrusted: goldmark's renderer, left unsafe
// off, writes no raw HTML (a <script> in the README is omitted, not
// passed) and no link or image of a dangerous scheme (javascript:,
// vbscript:, file:, data: other than images), and it makes no IDs
// (attribute syntax and heading IDs stay off: the page's own IDs cannot be
// taken). Headings move down two levels, under the page's.
var readmeMarkdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(readmeHeadings{}, 100))),
)

// readmeHeadings moves a README's headings under the page's h2 and h3.
type readmeHeadings struct{}

func (readmeHeadings) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering {
			h.Level = min(h.Level+2, 6)
		}
		return ast.WalkContinue, nil
	})
}

// readmeHTML is a README rendered for the module page; a README that does
// not render is shown as its text.
func readmeHTML(md string) template.HTML {
	var buf bytes.Buffer
	if err := readmeMarkdown.Convert([]byte(md), &buf); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(md) + "</pre>")
	}
	return template.HTML(buf.String())
}
