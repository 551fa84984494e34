package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// document is one parsed control-repo file: its node tree and the line of
// every field, ready for strict decoding.
type document struct {
	file string
	data []byte
	root *yaml.Node // the top-level mapping
	src  Source
	// byLine lists the field paths whose key or value starts on a line, so
	// decoder errors (which only carry a line) can name the field.
	byLine map[int][]string
}

// parseDocument parses data as exactly one YAML mapping. It reports syntax
// errors, empty files and extra documents, and returns nil when nothing can
// be decoded.
func parseDocument(file string, data []byte, is *Issues) *document {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			is.Add(Position{File: file, Line: 1}, "put one fleetbot object (apiVersion, kind, metadata, spec) in the file, or delete it",
				"file is empty")
			return nil
		}
		is.Add(syntaxPos(file, err), "fix the YAML syntax; a YAML linter shows the exact spot", "YAML syntax error: %s", yamlMessage(err))
		return nil
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			is.Add(syntaxPos(file, err), "fix the YAML syntax; a YAML linter shows the exact spot", "YAML syntax error: %s", yamlMessage(err))
			return nil
		}
		if blankDocument(&extra) {
			continue
		}
		is.Add(Position{File: file, Line: extra.Line}, "put one object per file: move this document to a file of its own",
			"more than one YAML document in the file")
		break
	}
	if blankDocument(&n) {
		is.Add(Position{File: file, Line: 1}, "put one fleetbot object (apiVersion, kind, metadata, spec) in the file, or delete it",
			"file is empty")
		return nil
	}
	root := &n
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		is.Add(Position{File: file, Line: root.Line}, "a control object is a mapping with apiVersion, kind, metadata and spec",
			"expected an object, found %s", nodeKindName(root))
		return nil
	}
	d := &document{
		file:   file,
		data:   data,
		root:   root,
		src:    Source{File: file, Line: root.Line, lines: map[string]int{}},
		byLine: map[int][]string{},
	}
	d.index(root, "")
	return d
}

// blankDocument reports whether n holds nothing but an empty "---" document.
func blankDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == "")
}

// index records the line of every map key and sequence item under path.
func (d *document) index(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue // merge keys: the merged fields keep their own lines
			}
			p := joinPath(path, k.Value)
			d.record(p, k.Line)
			d.record(p, v.Line)
			d.src.lines[p] = k.Line
			d.index(v, p)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := joinPath(path, strconv.Itoa(i))
			d.src.lines[p] = item.Line
			d.record(p, item.Line)
			d.index(item, p)
		}
	}
}

func (d *document) record(path string, line int) {
	for _, p := range d.byLine[line] {
		if p == path {
			return
		}
	}
	d.byLine[line] = append(d.byLine[line], path)
}

func joinPath(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

// scalar returns the value of a top-level scalar field and its line.
func (d *document) scalar(key string) (string, int, bool) {
	for i := 0; i+1 < len(d.root.Content); i += 2 {
		if d.root.Content[i].Value == key {
			v := d.root.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return "", v.Line, false
			}
			return v.Value, v.Line, true
		}
	}
	return "", 0, false
}

// has reports whether the document sets the field at the dotted path.
func (s Source) has(path string) bool {
	_, ok := s.lines[path]
	return ok
}

// decode decodes the document strictly into out: unknown fields and wrong
// types become issues with the line they occur on. It returns false when the
// decoder gave up, true when out holds everything that could be decoded.
//
// The node tree parsed by parseDocument is decoded directly when every key in it names a field
// (allKnown): then a strict decode of the text, which would parse the file a second time, can
// only give the same value. Otherwise, or when that decode reports anything, the text is
// decoded strictly from scratch, for the exact errors.
func (d *document) decode(out any, is *Issues) bool {
	if allKnown(d.root, reflect.TypeOf(out), map[reflect.Type]map[string]reflect.Type{}) {
		if d.root.Decode(out) == nil {
			return true
		}
		rv := reflect.ValueOf(out).Elem()
		rv.Set(reflect.Zero(rv.Type()))
	}
	return d.decodeStrict(out, is)
}

// decodeStrict decodes the document's text strictly into out (see decode).
func (d *document) decodeStrict(out any, is *Issues) bool {
	dec := yaml.NewDecoder(bytes.NewReader(d.data))
	dec.KnownFields(true)
	err := dec.Decode(out)
	if err == nil {
		return true
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, msg := range te.Errors {
			d.typeIssue(reflect.TypeOf(out), msg, is)
		}
		return true
	}
	is.Add(syntaxPos(d.file, err), "fix the YAML so it decodes", "cannot decode: %s", yamlMessage(err))
	return false
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// allKnown reports whether decoding n into a value of type t cannot raise an unknown-field
// error: every mapping key that lands in a struct names one of its fields. It is false too
// when it cannot tell for sure (aliases, merge keys, keys that are not strings, a node of the
// wrong kind, an inline field that is not a struct); the caller then decodes strictly. Types
// with their own UnmarshalYAML are not looked into: a strict decoder does not look into them
// either. fields caches each struct type's fields by YAML name.
func allKnown(n *yaml.Node, t reflect.Type, fields map[reflect.Type]map[string]reflect.Type) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	null := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if null {
			return true
		}
		if n.Kind != yaml.MappingNode {
			return false
		}
		var byName map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			var ok bool
			if byName, ok = fields[t]; !ok {
				byName = map[string]reflect.Type{}
				if !yamlFields(t, byName) {
					byName = nil
				}
				fields[t] = byName
			}
			if byName == nil {
				return false
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Anchor != "" || k.ShortTag() != "!!str" || k.Value == "<<" {
				return false
			}
			vt, ok := t, true
			if byName != nil {
				vt, ok = byName[k.Value]
			} else {
				vt = t.Elem()
			}
			if !ok || !allKnown(v, vt, fields) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		if null {
			return true
		}
		if n.Kind != yaml.SequenceNode {
			return false
		}
		for _, item := range n.Content {
			if !allKnown(item, t.Elem(), fields) {
				return false
			}
		}
	default:
		return n.Kind == yaml.ScalarNode
	}
	return true
}

// yamlFields records the fields of struct t by YAML name, inline structs included; false when
// t has an inline field that is not a struct.
func yamlFields(t reflect.Type, byName map[string]reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, inline := yamlTag(f)
		switch {
		case tag == "-":
		case inline:
			if f.Type.Kind() != reflect.Struct || !yamlFields(f.Type, byName) {
				return false
			}
		default:
			if _, dup := byName[tag]; !dup {
				byName[tag] = f.Type
			}
		}
	}
	return true
}

var (
	lineMsgRe   = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRe   = regexp.MustCompile(`^field (.+) not found in type .+$`)
	unmarshalRe = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	yamlLineRe  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// typeIssue turns one yaml.TypeError line into an issue naming the field.
func (d *document) typeIssue(root reflect.Type, msg string, is *Issues) {
	pos := Position{File: d.file, Line: d.src.Line}
	if m := lineMsgRe.FindStringSubmatch(msg); m != nil {
		pos.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if m := unknownRe.FindStringSubmatch(msg); m != nil {
		name := m[1]
		parent := ""
		for _, p := range d.byLine[pos.Line] {
			if p == name || strings.HasSuffix(p, "."+name) {
				parent = strings.TrimSuffix(strings.TrimSuffix(p, name), ".")
				break
			}
		}
		known := knownFields(root, parent)
		where := "at the top level"
		if parent != "" {
			where = "in " + parent
		}
		hint := "remove it"
		if s := closest(name, known); s != "" {
			hint = fmt.Sprintf("did you mean %q?", s)
		}
		if len(known) > 0 {
			hint += " (known fields " + where + ": " + strings.Join(known, ", ") + ")"
		}
		is.Add(pos, hint, "unknown field %q %s", name, where)
		return
	}
	if m := unmarshalRe.FindStringSubmatch(msg); m != nil {
		field := d.deepest(pos.Line)
		got := tagName(m[1])
		if m[2] != "" {
			got += " (" + m[2] + ")"
		}
		want := typeName(m[3])
		if field != "" {
			is.Add(pos, "write "+want+" here", "%s: expected %s, got %s", field, want, got)
		} else {
			is.Add(pos, "write "+want+" here", "expected %s, got %s", want, got)
		}
		return
	}
	is.Add(pos, "", "%s", msg)
}

// deepest returns the longest field path that starts on line.
func (d *document) deepest(line int) string {
	best := ""
	for _, p := range d.byLine[line] {
		if len(p) > len(best) {
			best = p
		}
	}
	return best
}

// knownFields lists the yaml field names of the struct at the dotted path
// below t, or nil when the path does not lead to a struct.
func knownFields(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			switch t.Kind() {
			case reflect.Struct:
				f, ok := structField(t, seg)
				if !ok {
					return nil
				}
				t = f
			case reflect.Map, reflect.Slice:
				t = t.Elem()
			default:
				return nil
			}
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	collectFields(t, &names)
	sort.Strings(names)
	return names
}

func structField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, inline := yamlTag(f)
		if tag == "-" {
			continue
		}
		if inline {
			if ft, ok := structField(f.Type, name); ok {
				return ft, true
			}
			continue
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

func collectFields(t reflect.Type, names *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, inline := yamlTag(f)
		switch {
		case tag == "-":
		case inline:
			collectFields(f.Type, names)
		default:
			*names = append(*names, tag)
		}
	}
}

func yamlTag(f reflect.StructField) (name string, inline bool) {
	tag, ok := f.Tag.Lookup("yaml")
	if !ok {
		if !f.IsExported() {
			return "-", false
		}
		return strings.ToLower(f.Name), false
	}
	parts := strings.Split(tag, ",")
	for _, p := range parts[1:] {
		if p == "inline" {
			return "", true
		}
	}
	if parts[0] == "" {
		return strings.ToLower(f.Name), false
	}
	return parts[0], false
}

// closest returns the known name within edit distance 2 of name, if any.
func closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func tagName(tag string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "str":
		return "a string"
	case "int", "float":
		return "a number"
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	return "!!" + tag
}

func typeName(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case goType == "[]string":
		return "a list of strings"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case goType == "control.Values" || strings.HasPrefix(goType, "map["):
		return "a mapping"
	case goType == "control.CountOrPercent":
		return "a count or a percentage"
	}
	return "an object"
}

func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// syntaxPos extracts the line of a yaml error ("yaml: line 3: ...").
func syntaxPos(file string, err error) Position {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		l, _ := strconv.Atoi(m[1])
		return Position{File: file, Line: l}
	}
	return Position{File: file}
}

// yamlMessage strips the "yaml: line N:" prefix the position already shows.
func yamlMessage(err error) string {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		return m[2]
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// platformDoc mirrors Platform for decoding: yaml cannot decode
// intstr.IntOrString, so the count-or-percent fields use CountOrPercent. The
// yaml tags must stay those of PlatformSpec and AccessSpec (a test checks).
type platformDoc struct {
	TypeMeta `yaml:",inline"`
	Metadata Meta            `yaml:"metadata"`
	Spec     platformSpecDoc `yaml:"spec"`
}

type platformSpecDoc struct {
	Owner         string          `yaml:"owner"`
	Admins        []string        `yaml:"admins"`
	DefaultBranch string          `yaml:"defaultBranch,omitempty"`
	Repos         RepoSpec        `yaml:"repos,omitempty"`
	PullRequests  PullRequestSpec `yaml:"pullRequests,omitempty"`
	Flux          FluxSpec        `yaml:"flux,omitempty"`
	Access        accessSpecDoc   `yaml:"access,omitempty"`
	MaxRemovals   *CountOrPercent `yaml:"maxRemovals,omitempty"`
	Components    []Component     `yaml:"components,omitempty"`

	ManagementClusters []ManagementCluster `yaml:"managementClusters,omitempty"`
	ProvisionProfiles  []ProvisionProfile  `yaml:"provisionProfiles,omitempty"`
	Rollout            RolloutSpec         `yaml:"rollout,omitempty"`
	Tenants            TenantSpec          `yaml:"tenants,omitempty"`
	RetiredClusters    []string            `yaml:"retiredClusters,omitempty"`
}

type accessSpecDoc struct {
	Mode              string          `yaml:"mode,omitempty"`
	MaxAccessRemovals *CountOrPercent `yaml:"maxAccessRemovals,omitempty"`
	BranchRules       *BranchRules    `yaml:"branchRules,omitempty"`
}

// CountOrPercent is a count (3) or a percentage of a set's size ("10%"), as Kubernetes'
// intstr.IntOrString; YAML decodes an integer as the count and any other scalar as the
// string that validation checks.
type CountOrPercent intstr.IntOrString

// UnmarshalYAML implements yaml.Unmarshaler.
func (v *CountOrPercent) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal !!%s into control.CountOrPercent",
			n.Line, strings.TrimPrefix(n.ShortTag(), "!!"))}}
	}
	if n.ShortTag() == "!!int" {
		i, err := strconv.ParseInt(n.Value, 0, 32)
		if err != nil {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal !!int `%s` into control.CountOrPercent", n.Line, n.Value)}}
		}
		*v = CountOrPercent(intstr.FromInt32(int32(i)))
		return nil
	}
	*v = CountOrPercent(intstr.FromString(n.Value))
	return nil
}

// MarshalJSON writes the count as a number and the percentage as a string, as
// intstr.IntOrString does.
func (v CountOrPercent) MarshalJSON() ([]byte, error) {
	return intstr.IntOrString(v).MarshalJSON()
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *CountOrPercent) UnmarshalJSON(b []byte) error {
	return (*intstr.IntOrString)(v).UnmarshalJSON(b)
}

// IntOrString returns the value as Kubernetes' type, nil for nil.
func (v *CountOrPercent) IntOrString() *intstr.IntOrString {
	if v == nil {
		return nil
	}
	x := intstr.IntOrString(*v)
	return &x
}

func (p *platformDoc) platform(src Source) *Platform {
	s := p.Spec
	return &Platform{
		TypeMeta: p.TypeMeta,
		Metadata: p.Metadata,
		Spec: PlatformSpec{
			Owner:         s.Owner,
			Admins:        s.Admins,
			DefaultBranch: s.DefaultBranch,
			Repos:         s.Repos,
			PullRequests:  s.PullRequests,
			Flux:          s.Flux,
			Access: AccessSpec{
				Mode:              s.Access.Mode,
				MaxAccessRemovals: s.Access.MaxAccessRemovals.IntOrString(),
				BranchRules:       s.Access.BranchRules,
			},
			MaxRemovals: s.MaxRemovals.IntOrString(),
			Components:  s.Components,

			ManagementClusters: s.ManagementClusters,
			ProvisionProfiles:  s.ProvisionProfiles,
			Rollout:            s.Rollout,
			Tenants:            s.Tenants,
			RetiredClusters:    s.RetiredClusters,
		},
		Source: src,
	}
}
