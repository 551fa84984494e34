// Package yamlsize bounds what a YAML text can cost to decode. YAML aliases let a few hundred
// bytes stand for billions of nodes ("billion laughs"): a decoder that expands them, as
// kustomize and every decode into Go values do, runs out of memory. Check counts the nodes a
// text expands to without expanding anything, and refuses a text over the bound before any
// decoder sees it.
package yamlsize

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// DefaultMaxNodes bounds the nodes one file may expand to: far above any real manifest (a
// 4 MiB ConfigMap is a few thousand nodes), far below what exhausts memory.
const DefaultMaxNodes = 1_000_000

// ErrTooLarge is returned (wrapped) for a text that expands to more nodes than allowed.
var ErrTooLarge = errors.New("YAML expands to too many nodes")

// Check parses every document of data into nodes (aliases stay references) and returns an
// error wrapping ErrTooLarge when, with aliases expanded, the documents would hold more than
// max nodes; a text that does not parse is not its concern (nil: the decoder that follows
// reports it with its position).
func Check(data []byte, max int) error {
	if !bytes.Contains(data, []byte("*")) {
		return nil // no alias: the parse that follows costs what the text costs
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	total := 0
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil
		}
		c := &counter{max: max - total, memo: map[*yaml.Node]int{}}
		size := c.count(&n, 0)
		if size < 0 {
			return fmt.Errorf("%w: over %d with aliases expanded (a YAML alias bomb?)", ErrTooLarge, max)
		}
		total += size
	}
}

type counter struct {
	max  int
	memo map[*yaml.Node]int
}

// count returns the expanded size of n, or -1 as soon as it passes max. Anchored nodes are
// counted once and remembered, so the walk is linear in the text.
func (c *counter) count(n *yaml.Node, depth int) int {
	if n == nil {
		return 0
	}
	if depth > 10_000 {
		return -1
	}
	if v, ok := c.memo[n]; ok {
		return v
	}
	size := 1
	if n.Kind == yaml.AliasNode {
		size = c.count(n.Alias, depth+1)
	} else {
		for _, ch := range n.Content {
			s := c.count(ch, depth+1)
			if s < 0 {
				return -1
			}
			size += s
			if size > c.max {
				return -1
			}
		}
	}
	if size > c.max {
		return -1
	}
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		c.memo[n] = size
	}
	return size
}
