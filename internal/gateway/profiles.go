package gateway

import "golang.org/x/time/rate"

// profile is how a device kind is served: backfill batch size, backfill
// batches awaiting confirmation at once, and the per-user backfill rate.
// Mobile devices get small batches and one at a time (radio, memory);
// desktops large ones, two in flight to hide the round trip.
type profile struct {
	pageSize int
	window   int
	rate     rate.Limit // messages per second of backfill, per user on a gateway
	burst    int
}

var profiles = map[string]profile{
	"mobile":  {pageSize: 100, window: 1, rate: 2000, burst: 500},
	"web":     {pageSize: 200, window: 2, rate: 5000, burst: 1000},
	"desktop": {pageSize: 500, window: 2, rate: 20000, burst: 2000},
}
