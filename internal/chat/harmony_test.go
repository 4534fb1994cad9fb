package chat

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// gpt-oss's harmony template (internal/toolcall/testdata/gpt_oss.jinja, the
// template gpt-oss-20b ships) renders as the reference Jinja does. The
// expected strings were rendered by jinja2 3.1.6 in transformers'
// apply_chat_template environment (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, its tojson with
// ensure_ascii=False, raise_exception, strftime_now pinned to 2025-03-07),
// not by this package. Covered: the default system block, a developer
// message and reasoning_effort, a tool definition rendered as a TypeScript
// namespace, an assistant tool call and its tool result (the commentary
// channel), and the training-form last turn with thinking and <|return|>.
func TestHarmonyTemplate(t *testing.T) {
	src, err := os.ReadFile("../toolcall/testdata/gpt_oss.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(string(src), "<|startoftext|>", "<|return|>")
	if err != nil {
		t.Fatal(err)
	}
	tpl.now = func() time.Time { return time.Date(2025, 3, 7, 9, 0, 0, 0, time.UTC) }
	for i, c := range harmonyCases {
		var msgs []Message
		if err := json.Unmarshal([]byte(c.messages), &msgs); err != nil {
			t.Fatal(err)
		}
		// thinking is an Extra key: the template reads message.thinking.
		var raw []map[string]any
		json.Unmarshal([]byte(c.messages), &raw)
		for j, m := range raw {
			if th, ok := m["thinking"]; ok {
				msgs[j].Extra = map[string]any{"thinking": th}
			}
		}
		extra := map[string]any{}
		if c.extra != "" {
			json.Unmarshal([]byte(c.extra), &extra)
		}
		got, err := tpl.Render(msgs, c.agp, extra)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got != c.want {
			t.Errorf("case %d:\n got %q\nwant %q", i, got, c.want)
		}
	}
}

var harmonyCases = []struct {
	messages, extra string
	agp             bool
	want            string
}{
	{
		"[{\"role\": \"user\", \"content\": \"Hello!\"}]",
		"",
		true,
		"<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-03-07\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>Hello!<|end|><|start|>assistant",
	},
	{
		"[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello.\", \"thinking\": \"greet\"}, {\"role\": \"user\", \"content\": \"Weather?\"}]",
		"{\"reasoning_effort\": \"high\"}",
		true,
		"<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-03-07\n\nReasoning: high\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|end|><|start|>user<|message|>Weather?<|end|><|start|>assistant",
	},
	{
		"[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]}, {\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 20}\"}]",
		"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}]}",
		true,
		"<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-03-07\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Get the weather\ntype get_weather = (_: {\n// City name\ncity: string,\nunit?: \"c\" | \"f\",\n}) => any;\n\n} // namespace functions<|end|><|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temp\\\": 20}\"<|end|><|start|>assistant",
	},
	{
		"[{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\", \"thinking\": \"simple sum\"}]",
		"{\"model_identity\": \"You are a test model.\"}",
		false,
		"<|start|>system<|message|>You are a test model.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-03-07\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>2+2?<|end|><|start|>assistant<|channel|>analysis<|message|>simple sum<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
	},
}
