package bench

import "time"

// MinimumTime is the shortest time in which n content-creating requests can
// all be made under GitHub's secondary limits of perMinute in any rolling
// minute and perHour in any rolling hour: the time of the last request when
// each goes as early as both windows allow, the first at time 0. Requests
// themselves are taken to be instant.
func MinimumTime(n, perMinute, perHour int) time.Duration {
	if n <= 0 {
		return 0
	}
	at := make([]time.Duration, n)
	for i := range at {
		if i > 0 {
			at[i] = at[i-1]
		}
		if i >= perMinute {
			at[i] = max(at[i], at[i-perMinute]+time.Minute)
		}
		if i >= perHour {
			at[i] = max(at[i], at[i-perHour]+time.Hour)
		}
	}
	return at[n-1]
}
