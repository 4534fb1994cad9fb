package tokenizer

// TokenBytes returns the bytes id contributes to decoded text in the middle
// of a stream: the decoder chain applied to the token alone, with byte
// fallback tokens (<0xNN>) giving their raw byte and byte-level runes their
// bytes. Rules that only act at the start of a stream (Metaspace dropping
// the first token's replacement, Strip after Fuse) are left out, and no
// UTF-8 repair is done, so the bytes of consecutive tokens concatenate to
// the stream's text. Unknown ids give nil. Constrained decoding walks
// these bytes through its automaton.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.idToToken) || !t.known[id] {
		return nil
	}
	tok := t.idToToken[id]
	if t.decoder == nil {
		return []byte(tok)
	}
	b, _ := pieceBytes(t.decoder, []byte(tok), false)
	return b
}

// pieceBytes applies one decoder to a lone token's bytes. fused reports
// whether a Fuse has run: a Strip after it acts on the whole text's ends
// only, so it does not touch a token in the middle.
func pieceBytes(d decoder, b []byte, fused bool) ([]byte, bool) {
	switch d := d.(type) {
	case byteLevelDec:
		return byteLevelBytes(nil, string(b)), fused
	case byteFallbackDec:
		if c, ok := parseByteToken(string(b)); ok {
			return []byte{c}, fused
		}
		return b, fused
	case fuseDec:
		return b, true
	case replaceDec:
		return d.r.replace(b), fused
	case metaspaceDec:
		return []byte(metaspaceDec{repl: d.repl}.decodeChain([]string{string(b)})[0]), fused
	case stripDec:
		if fused {
			return b, fused
		}
		return []byte(d.decodeChain([]string{string(b)})[0]), fused
	case seqDec:
		for _, s := range d {
			b, fused = pieceBytes(s, b, fused)
		}
		return b, fused
	}
	return b, fused
}
