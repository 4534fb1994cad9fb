package server

import "net/http"

// handleModel is GET /v1/models/{id}: the served model, or 404 in the
// OpenAI shape.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	m := s.model()
	if m == nil {
		writeError(w, loadingError())
		return
	}
	if id := r.PathValue("id"); id != m.name {
		writeError(w, modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, modelInfo{ID: m.name, Object: "model", Created: m.created, OwnedBy: "mlxcel", MaxModelLen: m.eng.MaxContext()})
}
