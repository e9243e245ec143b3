package gateway

import (
	"reflect"
	"testing"
)

// A zero Options gets every default of DefaultOptions (and a random ID).
func TestZeroOptionsGetDefaults(t *testing.T) {
	var o Options
	o.setDefaults()
	if o.ID == "" {
		t.Error("setDefaults left ID empty")
	}
	o.ID = ""
	diffOptions(t, "zero Options after setDefaults", o, DefaultOptions())
}

// An option that is set keeps its value.
func TestSetOptionsKeepTheirValue(t *testing.T) {
	o := DefaultOptions()
	o.ID = "gw-1"
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Float64:
			f.SetFloat(f.Float() + 1)
		case reflect.String:
			f.SetString(f.String() + "x")
		}
	}
	got := o
	got.setDefaults()
	diffOptions(t, "set Options after setDefaults", got, o)
}

// Every option has a default but the few that cannot: a new option gets
// one in DefaultOptions (and a line in setDefaults), or is listed here.
func TestEveryOptionHasADefault(t *testing.T) {
	none := map[string]bool{
		"ID":        true, // random per process
		"Backfill":  true, // nil: the main connection
		"SendStore": true, // nil: the store New is given
		"TLS":       true, // nil: plain listeners
		"Web":       true, // nil: no web client at /app
		"DevToken":  true, // nil: no development tokens
		"NoPark":    true, // false: idle connections park (Linux)

	}
	d := reflect.ValueOf(DefaultOptions())
	for i := range d.NumField() {
		if name := d.Type().Field(i).Name; !none[name] && d.Field(i).IsZero() {
			t.Errorf("option %s has no default in DefaultOptions", name)
		}
	}
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
