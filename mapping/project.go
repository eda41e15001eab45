package mapping

import "strings"

// DataProject names the vendor field of session.started (AEP-0002 payloads
// are open) carrying the session's project: the last element of its working
// directory once that has been through the redaction pipeline. AEP carries
// the directory itself (cwd) only at redacted, a path naming its user; the
// project's name alone is an identifier, like the file names subject carries
// at metadata (AEP-0001 §12), and an unannotated member rides at metadata
// (AEP-0002 §5.1 rule 4), so every reader above none can tell sessions apart
// by what they work on.
const DataProject = "x-" + Vendor + "-project"

// ProjectName is the last element of a working directory, POSIX or Windows
// ("" for none).
func ProjectName(dir string) string {
	dir = strings.TrimRight(dir, `/\`)
	if i := strings.LastIndexAny(dir, `/\`); i >= 0 {
		dir = dir[i+1:]
	}
	return dir
}
