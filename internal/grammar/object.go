package grammar

import "sort"

// object compiles an object schema. Properties are written in the order
// of "properties" (required ones always, optional ones may be skipped),
// then, only when additionalProperties is true or a schema, any number of
// further members whose keys are none of the declared ones. An absent
// additionalProperties generates no extra members (what strict mode asks
// for, and never wrong: leaving members out always validates).
//
// The automaton has two states between members, q0[i] (nothing written
// yet) and q1[i] (something written: the next member needs a comma), so
// each member's value is built once however many properties are
// optional.
func (c *compiler) object(s *jval, path string, depth int) frag {
	n := c.n
	props := s.get("properties")
	if props != nil && props.kind != 'o' {
		return c.fail(path+"/properties", "must be an object")
	}
	var keys []string
	var schemas []*jval
	if props != nil {
		keys, schemas = props.keys, props.vals
	}
	required := map[string]bool{}
	if r := s.get("required"); r != nil {
		if r.kind != 'a' {
			return c.fail(path+"/required", "must be an array of strings")
		}
		for _, x := range r.vals {
			required[x.str] = true
		}
	}
	extra := s.get("additionalProperties")
	if extra == nil {
		extra = &jval{kind: 'b', b: false}
	}
	// A required name without a property schema takes the
	// additionalProperties schema: any value when it is absent (JSON
	// Schema allows it), none when it is false (unsatisfiable).
	var missing []string
	for k := range required {
		if props.get(k) == nil {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	missingSchema := s.get("additionalProperties")
	if missingSchema == nil {
		missingSchema = &jval{kind: 'b', b: true}
	}
	for _, k := range missing {
		keys, schemas = append(keys[:len(keys):len(keys)], k), append(schemas[:len(schemas):len(schemas)], missingSchema)
	}

	open, close := n.lit("{"), n.lit("}")
	q0, q1 := make([]int32, len(keys)+1), make([]int32, len(keys)+1)
	for i := range q0 {
		q0[i], q1[i] = n.state(), n.state()
	}
	n.eps(open.out, q0[0])
	member := func(key, value frag, i int, from0, from1, to int32) {
		m := n.seq(key, n.colon(), value)
		sep := n.comma()
		n.eps(from0, m.in)
		n.eps(from1, sep.in)
		n.eps(sep.out, m.in)
		n.eps(m.out, to)
	}
	for i, k := range keys {
		v := c.schema(schemas[i], path+"/properties/"+k, depth-1)
		member(n.lit(n.keyText(k)), v, i, q0[i], q1[i], q1[i+1])
		if !required[k] {
			n.eps(q0[i], q0[i+1])
			n.eps(q1[i], q1[i+1])
		}
	}
	last := len(keys)
	if !(extra.kind == 'b' && !extra.b) {
		v := c.schema(extra, path+"/additionalProperties", depth-1)
		member(n.keyExcept(keys), v, last, q0[last], q1[last], q1[last])
	}
	n.eps(q0[last], close.in)
	n.eps(q1[last], close.in)
	return frag{open.in, close.out}
}

// keyChars are the bytes of generated additional-property keys: printable
// ASCII without '"' and '\', so that no escape can spell a declared key
// in another way.
var keyChars = func() byteSet {
	s := rangeSet(0x20, 0x7E)
	s[0] &^= 1 << '"'
	s[1] &^= 1 << ('\\' - 64)
	return s
}()

// keyExcept is a quoted key of keyChars that is none of keys: a trie of
// the keys, leaving it for a free loop on any byte no key continues with.
func (n *nfa) keyExcept(keys []string) frag {
	q := `"`
	if n.gemmaQuote != "" {
		q = n.gemmaQuote
	}
	open, close := n.lit(q), n.lit(q)
	free := n.state()
	loop := n.class(keyChars)
	n.eps(free, loop.in)
	n.eps(loop.out, free)
	n.eps(free, close.in)

	type node struct {
		st    int32
		kids  map[byte]*node
		isKey bool
	}
	root := &node{st: open.out, kids: map[byte]*node{}}
	for _, k := range keys {
		cur := root
		root.isKey = root.isKey || k == ""
		for i := 0; i < len(k); i++ {
			b := k[i]
			if !keyChars.has(b) {
				break // a key no generated key can spell
			}
			nx := cur.kids[b]
			if nx == nil {
				nx = &node{st: n.state(), kids: map[byte]*node{}}
				cur.kids[b] = nx
			}
			cur = nx
			if i == len(k)-1 {
				cur.isKey = true
			}
		}
	}
	var build func(t *node)
	build = func(t *node) {
		rest := keyChars
		bs := make([]int, 0, len(t.kids))
		for b := range t.kids {
			bs = append(bs, int(b))
		}
		sort.Ints(bs)
		for _, b := range bs {
			kid := t.kids[byte(b)]
			h := n.state()
			n.eps(t.st, h)
			n.edge(h, rangeSet(byte(b), byte(b)), kid.st)
			rest[b>>6] &^= 1 << (b & 63)
			build(kid)
		}
		h := n.state()
		n.eps(t.st, h)
		n.edge(h, rest, free)
		if !t.isKey {
			n.eps(t.st, close.in)
		}
	}
	build(root)
	return frag{open.in, close.out}
}
