package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// trie finds added tokens with leftmost-longest semantics, like the
// aho-corasick automaton HF builds (MatchKind::LeftmostLongest).
type trie struct {
	root  [256]int32 // child of the root per byte; 0 = none
	nodes []trieNode
}

type trieNode struct {
	keys     []byte
	children []int32
	term     int32 // index into the token list, -1 if none
}

func newTrie(patterns []string) *trie {
	t := &trie{nodes: []trieNode{{term: -1}}}
	for idx, p := range patterns {
		if p == "" {
			continue
		}
		node := int32(0)
		for i := 0; i < len(p); i++ {
			node = t.child(node, p[i], true)
		}
		if t.nodes[node].term < 0 {
			t.nodes[node].term = int32(idx)
		}
	}
	return t
}

func (t *trie) child(node int32, c byte, create bool) int32 {
	if node == 0 {
		if ch := t.root[c]; ch != 0 || !create {
			return ch
		}
		t.nodes = append(t.nodes, trieNode{term: -1})
		t.root[c] = int32(len(t.nodes) - 1)
		return t.root[c]
	}
	n := &t.nodes[node]
	k := sort.Search(len(n.keys), func(i int) bool { return n.keys[i] >= c })
	if k < len(n.keys) && n.keys[k] == c {
		return n.children[k]
	}
	if !create {
		return 0
	}
	t.nodes = append(t.nodes, trieNode{term: -1})
	id := int32(len(t.nodes) - 1)
	n = &t.nodes[node]
	n.keys = append(n.keys, 0)
	n.children = append(n.children, 0)
	copy(n.keys[k+1:], n.keys[k:])
	copy(n.children[k+1:], n.children[k:])
	n.keys[k], n.children[k] = c, id
	return id
}

// longestAt returns the longest pattern starting at s[i] (index, end).
func (t *trie) longestAt(s []byte, i int) (int32, int) {
	node := t.root[s[i]]
	best, bestEnd := int32(-1), 0
	for j := i + 1; node != 0; j++ {
		if term := t.nodes[node].term; term >= 0 {
			best, bestEnd = term, j
		}
		if j >= len(s) {
			break
		}
		node = t.child(node, s[j], false)
	}
	return best, bestEnd
}

// addedSet is the added tokens matched in one form of the text (raw or
// normalized).
type addedSet struct {
	trie   *trie
	tokens []*addedToken
}

func newAddedSet(tokens []*addedToken, patterns []string) *addedSet {
	if len(tokens) == 0 {
		return nil
	}
	return &addedSet{trie: newTrie(patterns), tokens: tokens}
}

// split walks s calling text for the stretches between added tokens and
// tok for each token, mirroring AddedVocabulary::find_matches including
// single_word, lstrip and rstrip.
func (a *addedSet) split(s []byte, text func(start, end int), tok func(id int32)) {
	if a == nil {
		if len(s) > 0 {
			text(0, len(s))
		}
		return
	}
	done := 0 // end of what has been handed out
	for i := 0; i < len(s); {
		if a.trie.root[s[i]] == 0 {
			i++
			continue
		}
		idx, end := a.trie.longestAt(s, i)
		if idx < 0 {
			i++
			continue
		}
		t := a.tokens[idx]
		start, stop := i, end
		i = end // a rejected match still consumes its bytes, as in HF
		if t.SingleWord {
			startOK := start == 0 || !endsWithWord(s[:start])
			stopOK := stop == len(s) || !startsWithWord(s[stop:])
			if !startOK || !stopOK {
				continue
			}
		}
		if t.LStrip {
			ns := start
			for ns > done {
				r, n := utf8.DecodeLastRune(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= n
			}
			start = ns
		}
		if t.RStrip {
			for stop < len(s) {
				r, n := utf8.DecodeRune(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += n
			}
			i = stop
		}
		if start > done {
			text(done, start)
		}
		tok(t.ID)
		done = stop
	}
	if done < len(s) {
		text(done, len(s))
	}
}

func endsWithWord(s []byte) bool {
	r, _ := utf8.DecodeLastRune(s)
	return len(s) > 0 && isWordRune(r)
}

func startsWithWord(s []byte) bool {
	r, _ := utf8.DecodeRune(s)
	return len(s) > 0 && isWordRune(r)
}
