package store

import "strings"

// LikeEscape is the ESCAPE clause that goes with a pattern whose literal
// parts went through EscapeLike: `col LIKE ?` + LikeEscape.
const LikeEscape = ` ESCAPE '\'`

// EscapeLike escapes LIKE's wildcards (% and _) and its escape character
// in s, so that a pattern built around it matches s as written, on both
// stores.
func EscapeLike(s string) string { return likeEscaper.Replace(s) }

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
