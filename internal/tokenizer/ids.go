package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ParseIDs reads token ids written as a JSON array ("[1, 2]") or
// separated by commas and/or whitespace ("1,2 3").
func ParseIDs(s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		var ids []int32
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("ids: %w", err)
		}
		return ids, nil
	}
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	ids := make([]int32, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("ids: %q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
