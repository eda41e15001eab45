package stacktest

// StampPkg is the package whose variables a release build sets with -X.
const StampPkg = "github.com/aep-kimi/aep-kimi/internal/buildinfo"
