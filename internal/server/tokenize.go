package server

import (
	"bufio"
	"net/http"
	"strconv"
)

// /tokenize and /detokenize follow llama-server:
//
//	POST /tokenize   {"content": "...", "add_special": false, "with_pieces": false} -> {"tokens": [...]}
//	POST /detokenize {"tokens": [...]} -> {"content": "..."}
//
// add_special defaults to false as in llama-server; with_pieces returns
// {"id", "piece"} objects instead of bare ids.
type tokenizeRequest struct {
	Content    *string `json:"content"`
	AddSpecial bool    `json:"add_special"`
	WithPieces bool    `json:"with_pieces"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	m := s.model()
	if m == nil {
		writeError(w, loadingError())
		return
	}
	var req tokenizeRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Content == nil {
		writeError(w, badRequest("content", "'content' is required."))
		return
	}
	ids, err := m.tok.Encode(*req.Content, req.AddSpecial)
	if err != nil {
		writeError(w, badRequest("content", "tokenizing: %v", err))
		return
	}
	writeTokens(w, m, ids, req.WithPieces)
}

// writeTokens streams {"tokens": [...]} through a small buffer: the
// answer for a 15 MiB text is hundreds of MB of JSON with pieces, which
// json.Marshal would hold (twice, while growing) before sending.
func writeTokens(w http.ResponseWriter, m *served, ids []int32, pieces bool) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"tokens":[`)
	var num []byte
	for i, id := range ids {
		if i > 0 {
			bw.WriteByte(',')
		}
		num = strconv.AppendInt(num[:0], int64(id), 10)
		if !pieces {
			bw.Write(num)
			continue
		}
		bw.WriteString(`{"id":`)
		bw.Write(num)
		bw.WriteString(`,"piece":`)
		bw.Write(m.texts.jsonText(id))
		bw.WriteByte('}')
	}
	bw.WriteString("]}\n")
	bw.Flush()
}

type detokenizeRequest struct {
	Tokens []int64 `json:"tokens"`
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	m := s.model()
	if m == nil {
		writeError(w, loadingError())
		return
	}
	var req detokenizeRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	ids := make([]int32, len(req.Tokens))
	for i, t := range req.Tokens {
		if n := m.tok.VocabSize(); t < 0 || t >= int64(n) {
			writeError(w, badRequest("tokens", "Token id %d at position %d is outside the vocabulary (0..%d).", t, i, n-1))
			return
		}
		ids[i] = int32(t)
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": m.tok.Decode(ids, false)})
}
