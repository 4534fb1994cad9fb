package server

import (
	"net/http"
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

type tokenPiece struct {
	ID    int32  `json:"id"`
	Piece string `json:"piece"`
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
	if !req.WithPieces {
		if ids == nil {
			ids = []int32{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	pieces := make([]tokenPiece, len(ids))
	for i, id := range ids {
		pieces[i] = tokenPiece{ID: id, Piece: m.texts.text(id)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": pieces})
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
