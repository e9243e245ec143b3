package docmarks

import "testing"

func TestReplace(t *testing.T) {
	doc := "# T\n\nhand\n<!-- x:begin -->\nold\nlines\n<!-- x:end -->\nafter\n"
	got, err := Replace([]byte(doc), "x", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# T\n\nhand\n<!-- x:begin -->\nnew\n<!-- x:end -->\nafter\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	again, err := Replace(got, "x", "new\n")
	if err != nil || string(again) != string(got) {
		t.Errorf("replacing with the same body changed the document: %q, %v", again, err)
	}
	for _, bad := range []string{
		"no markers\n",
		"<!-- x:end -->\n<!-- x:begin -->\n",
		"<!-- x:begin -->\n<!-- x:end -->\n<!-- x:begin -->\n",
		"<!-- x:begin -->\ntext <!-- x:end -->\n",
	} {
		if _, err := Replace([]byte(bad), "x", ""); err == nil {
			t.Errorf("Replace(%q) accepted it", bad)
		}
	}
}
