package main

// The IANA time zone database, embedded in the binary: change windows (platform.yaml
// spec.rollout.windows) name time zones, and the release image is FROM scratch, with no
// /usr/share/zoneinfo. The system's database, where there is one, is still preferred by
// time.LoadLocation; this one is the fallback.
import _ "time/tzdata"
