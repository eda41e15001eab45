package stacktest

import (
	"fmt"
	"slices"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// LogIDs is the adapter log's order of a session: its ids by (epoch, seq).
func LogIDs(ev []*aep.Event) []string {
	sorted := slices.Clone(ev)
	slices.SortStableFunc(sorted, func(a, b *aep.Event) int {
		if c := a.EpochOrZero() - b.EpochOrZero(); c != 0 {
			return int(c)
		}
		return int(*a.Seq - *b.Seq)
	})
	ids := make([]string, len(sorted))
	for i, e := range sorted {
		ids[i] = e.ID
	}
	return ids
}

// KimiEvent is a sequenced kimi-code event of session as an emitter sends it.
func KimiEvent(session, typ string, seq int, rest string) string {
	return fmt.Sprintf(`{"aep":"0.1","id":%q,"type":%q,"time":%q,"source":"aep://e2e/kimi-code/%s","agent":"kimi-code","session":%q,"seq":%d,"epoch":1%s}`,
		aep.NewID(), typ, aep.FormatTime(time.Now()), session, session, seq, rest)
}
