package stacktest

// UsageScript reports a context past half of Kimi's 131072-token window
// (Kimi compacts before a prompt once the context and its 50000 reserved
// tokens would not fit: not at 70010), and tokens that add up.
var UsageScript = map[string]any{
	"responses": []map[string]any{
		{"match": "fill (one|two|three)", "text": "filled", "usage": map[string]int{"prompt_tokens": 70_000, "completion_tokens": 10}, "repeat": true},
	},
	"default": map[string]any{"text": "(mock default)", "usage": map[string]int{"prompt_tokens": 100, "completion_tokens": 1}},
}
