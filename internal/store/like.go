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

// LikeJSONString is a LIKE pattern (to use with LikeEscape) matching a
// JSON document, as encoding/json writes it (compact), that holds the
// string member "key":"value": how a domain finds the rows whose settings
// document names something (an agent pool, for one).
func LikeJSONString(key, value string) string {
	return `%"` + EscapeLike(key) + `":"` + EscapeLike(value) + `"%`
}

// LikeJSONKey is a LIKE pattern (to use with LikeEscape) matching a JSON
// document, as encoding/json writes it (compact), that has a member key,
// whatever its value.
func LikeJSONKey(key string) string {
	return `%"` + EscapeLike(key) + `":%`
}
