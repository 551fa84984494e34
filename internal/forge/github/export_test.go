package github

// ScanQueries returns the GraphQL documents Scan sends, for tests that check them against
// GitHub's schema.
func ScanQueries(named int) map[string]string {
	return map[string]string{"owner": ownerScanQuery, "named": namedScanQuery(named)}
}
