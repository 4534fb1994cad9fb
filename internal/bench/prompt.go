package bench

import (
	"fmt"
	"strings"
)

// Encoder turns text into token ids; *tokenizer.Tokenizer satisfies it.
type Encoder interface {
	Encode(text string, addSpecial bool) ([]int32, error)
}

// ShortPrompt is the prompt used without --prompt-tokens (the original
// project's default, so short-prompt rows stay comparable).
const ShortPrompt = "Hello, how are you today?"

// LongPromptLabel goes in the CSV's prompt column for synthesised long
// prompts; the version suffix changes whenever Corpus does, because
// different text is a different workload.
const LongPromptLabel = "corpus-v1"

// Corpus is the paragraph repeated to build long prompts: plain English
// prose, so every tokenizer splits it the way it splits ordinary text
// (no rare scripts or digits that would inflate or deflate token counts).
const Corpus = `The old lighthouse stood at the edge of the harbour, where the river met the sea. ` +
	`Every evening the keeper climbed the narrow stairs, trimmed the wick and polished the great lens until it shone. ` +
	`Ships coming home after long voyages watched for its slow white beam, and the fishermen said that as long as ` +
	`the light turned, the town would be safe. In winter the storms came in from the west, throwing spray over the ` +
	`rocks and rattling the windows of the houses along the quay. Children pressed their faces to the glass to count ` +
	`the waves, while their parents mended nets by the fire and told stories about the years when the ice reached ` +
	`all the way to the island. In spring the gulls returned, the markets filled with early vegetables, and the ` +
	`ferry began its daily crossing again, carrying letters, bread and visitors who wanted to see the famous light.`

// LongPrompt tokenises Corpus repeated as often as needed and truncates it
// to exactly n tokens. The whole text is encoded at once (not paragraph
// tokens concatenated) so merges across paragraph boundaries are what a
// real long document would give. Special tokens (BOS) are included, as a
// real request would have them.
func LongPrompt(enc Encoder, n int) ([]int32, error) {
	if n <= 0 {
		return nil, fmt.Errorf("prompt length %d must be positive", n)
	}
	reps := 1
	for range 20 {
		text := strings.TrimSpace(strings.Repeat(Corpus+"\n\n", reps))
		ids, err := enc.Encode(text, true)
		if err != nil {
			return nil, err
		}
		if len(ids) >= n {
			return ids[:n], nil
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("the tokenizer produced no tokens for the corpus")
		}
		// Grow by the observed tokens per repetition, with margin.
		reps = max(reps+1, reps*n*11/(10*len(ids))+1)
	}
	return nil, fmt.Errorf("could not build a %d-token prompt", n)
}
