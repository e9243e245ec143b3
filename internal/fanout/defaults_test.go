package fanout

import (
	"reflect"
	"testing"
)

// A zero Options gets every default of DefaultOptions, and all of the
// layout's SEND partitions.
func TestZeroOptionsGetDefaults(t *testing.T) {
	var o Options
	o.setDefaults()
	want := DefaultOptions()
	for p := range want.Layout.SendPartitions {
		want.Partitions = append(want.Partitions, p)
	}
	diffOptions(t, "zero Options after setDefaults", o, want)
}

// Options that are set keep their value.
func TestSetOptionsKeepTheirValue(t *testing.T) {
	o := DefaultOptions()
	o.BatchSize++
	o.FetchWait++
	o.PublishTimeout++
	o.MemberCacheSize++
	o.Partitions = []int{3}
	got := o
	got.setDefaults()
	diffOptions(t, "set Options after setDefaults", got, o)
}

// diffOptions reports each field of got that differs from want.
func diffOptions(t *testing.T, what string, got, want Options) {
	t.Helper()
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			t.Errorf("%s: %s = %v, want %v", what, g.Type().Field(i).Name, g.Field(i), w.Field(i))
		}
	}
}
