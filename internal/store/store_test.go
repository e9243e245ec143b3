package store_test

import (
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

func TestMigrationsApplyToEmptyDatabaseAndAreIdempotent(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.Database(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v1, err := st.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v1 < 1 {
		t.Fatalf("schema version %d after migrating an empty database", v1)
	}
	for _, table := range []string{"msg_content", "conversation", "conv_member", "device_cursor", "inbox_archive", "send_reject"} {
		var ok bool
		if err := st.Pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil || !ok {
			t.Errorf("table %s missing after migration (err %v)", table, err)
		}
	}
	// Again, and concurrently, as several services starting at once do.
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			v, err := st.Migrate(ctx)
			if err == nil && v != v1 {
				err = errors.New("version changed on a repeated migration")
			}
			errs <- err
		}()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDirectConversationIsUniquePerPair(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	a, created, err := st.CreateConversation(ctx, store.KindDirect, []int64{7, 3}, false)
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	b, created, err := st.CreateConversation(ctx, store.KindDirect, []int64{3, 7}, false)
	if err != nil || created || b != a {
		t.Fatalf("same pair again: id %d (first %d) created=%v err=%v", b, a, created, err)
	}
	if _, _, err := st.CreateConversation(ctx, store.KindDirect, []int64{1, 2, 3}, false); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("direct with three members: err = %v, want ErrInvalid", err)
	}
	if _, err := st.AddMembers(ctx, a, []int64{9}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("adding to a direct conversation: err = %v, want ErrInvalid", err)
	}
}

func TestMembershipChangesBumpVersionAndKeepHistory(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	id, _, err := st.CreateConversation(ctx, store.KindGroup, []int64{1, 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	c0, _ := st.GetConversation(ctx, id)
	v1, err := st.AddMembers(ctx, id, []int64{3})
	if err != nil || v1 <= c0.MemberVer {
		t.Fatalf("add: ver %d (was %d), err %v", v1, c0.MemberVer, err)
	}
	v2, err := st.RemoveMembers(ctx, id, []int64{1})
	if err != nil || v2 <= v1 {
		t.Fatalf("remove: ver %d (was %d), err %v", v2, v1, err)
	}
	c, err := st.GetConversation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Members) != 3 || c.Members[0].UID != 1 || c.Members[0].LeftSeq == nil {
		t.Fatalf("members after remove: %+v (a former member keeps its row with left_seq)", c.Members)
	}
	if _, err := st.GetConversation(ctx, 999999); !errors.Is(err, store.ErrConvNotFound) {
		t.Fatalf("missing conversation: err = %v", err)
	}
	if _, err := st.AddMembers(ctx, 999999, []int64{1}); !errors.Is(err, store.ErrConvNotFound) {
		t.Fatalf("add to missing conversation: err = %v", err)
	}
}

// The login summary is served by indexes, never by scanning inboxes or the
// whole membership table: checked on 40,000 memberships and 80,000 messages.
func TestSummaryQueryUsesIndexes(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	_, err := st.Pool.Exec(ctx, `
		INSERT INTO conversation (conv_id, kind, last_seq) SELECT g, 2, 20 FROM generate_series(1, 4000) g;
		INSERT INTO conv_member (conv_id, uid) SELECT c, u FROM generate_series(1, 4000) c, generate_series(1, 10) u
		  WHERE u <= 10;
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		  SELECT `+nowKey()+` + g * 100 + s, g, s, 1, 'd', 'c' || g || '-' || s, 1, 'hello', now()
		  FROM generate_series(1, 4000) g, generate_series(1, 20) s;
		INSERT INTO conv_expiry (conv_id, expired_seq, expired_msg_id) SELECT g, 5, g FROM generate_series(1, 4000, 2) g;
		ANALYZE`)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := st.ExplainSummary(ctx, 12345)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary plan:\n%s", plan)
	if !strings.Contains(plan, "conv_member_by_uid") {
		t.Fatalf("the summary does not use the conv_member_by_uid index:\n%s", plan)
	}
	if !strings.Contains(plan, "conv_seq = c.last_seq") {
		t.Fatalf("the last message is not looked up by (conv_id, conv_seq):\n%s", plan)
	}
	if scans := seqScansOfRows(t, st, plan); len(scans) > 0 {
		t.Fatalf("the summary scans %v:\n%s", scans, plan)
	}
}

// nowKey is the smallest msg_id of now (SQL): fixtures' rows go into the
// current time range, as a running installation's do.
func nowKey() string { return strconv.FormatInt(ids.AtTime(time.Now()), 10) }

// seqScansOfRows returns the tables plan scans sequentially that hold rows
// (the planner scans an empty partition of a time range for nothing).
func seqScansOfRows(t *testing.T, st *store.Store, plan string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`Seq Scan on (\S+)`).FindAllStringSubmatch(plan, -1) {
		var n int
		if err := st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{m[1]}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, m[1])
		}
	}
	return out
}

// Every membership a member had is answerable by conv_seq: a former member
// keeps its span, one who comes back keeps the earlier one too (adjacent
// spans merge), and a membership that saw no message has no span.
func TestMemberSpansKeepEveryMembership(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	conv, _, err := st.CreateConversation(ctx, store.KindGroup, []int64{1, 2, 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	// Messages are stood in for by last_seq (the fanout moves it).
	at := func(seq int64) {
		if _, err := st.Pool.Exec(ctx, `UPDATE conversation SET last_seq = $2 WHERE conv_id = $1`, conv, seq); err != nil {
			t.Fatal(err)
		}
	}
	change := func(add bool, uids ...int64) {
		var err error
		if add {
			_, err = st.AddMembers(ctx, conv, uids)
		} else {
			_, err = st.RemoveMembers(ctx, conv, uids)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	at(2)
	change(false, 3)
	at(5)
	change(true, 3, 4)
	change(false, 2)
	at(7)
	change(false, 3)
	change(true, 3, 5)
	change(false, 5)

	spans, err := st.MemberSpans(ctx, []int64{conv})
	if err != nil {
		t.Fatal(err)
	}
	const open = math.MaxInt64
	want := []store.MemberSpan{
		{UID: 1, After: 0, Until: open},
		{UID: 2, After: 0, Until: 5},
		{UID: 3, After: 0, Until: 2},
		{UID: 3, After: 5, Until: open},
		{UID: 4, After: 5, Until: open},
	}
	if !slices.Equal(spans[conv], want) {
		t.Fatalf("spans %v, want %v", spans[conv], want)
	}
}

// Every read path that asks who received which conv_seq (pulls, read
// counts, trace) is served by indexes: the membership row by its primary
// key, messages by (conv_id, conv_seq) per span, entries by msg_id. Checked
// on 20,000 memberships (a tenth of them rejoined), 60,000 messages and
// 180,000 inbox entries.
func TestMembershipQueriesUseIndexes(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	_, err := st.Pool.Exec(ctx, `
		INSERT INTO conversation (conv_id, kind, last_seq) SELECT g, 2, 30 FROM generate_series(1, 2000) g;
		INSERT INTO conv_member (conv_id, uid, joined_seq, past_seqs)
		  SELECT c, u, CASE WHEN u = 10 THEN 20 ELSE 0 END,
		         CASE WHEN u = 10 THEN '{(0,10]}'::int8multirange ELSE '{}' END
		  FROM generate_series(1, 2000) c, generate_series(1, 10) u;
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		  SELECT `+nowKey()+` + g * 100 + s, g, s, 1, 'd', 'c' || g || '-' || s, 1, 'hello', now()
		  FROM generate_series(1, 2000) g, generate_series(1, 30) s;
		INSERT INTO inbox_archive (uid, seq, msg_id, conv_id, conv_seq, kind, tkey)
		  SELECT u, g * 100 + s, `+nowKey()+` + g * 100 + s, g, s, 1, `+nowKey()+` + g * 100 + s
		  FROM generate_series(1, 2000) g, generate_series(1, 30) s, generate_series(1, 3) u;
		INSERT INTO conv_expiry (conv_id, expired_seq, expired_msg_id) SELECT g, 5, g FROM generate_series(1, 2000, 2) g;
		ANALYZE`)
	if err != nil {
		t.Fatal(err)
	}
	afters, untils := []int64{0, 20}, []int64{10, 30}
	for _, q := range []struct {
		name  string
		sql   string
		args  []any
		using []string
	}{
		{"visible", store.SQLVisible, []any{10, 1234}, []string{"conversation_pkey", "conv_member_pkey"}},
		{"pull after", store.SQLPullAfter, []any{1234, afters, untils, 51}, []string{"_conv_seq on msg_content_r"}},
		{"pull before", store.SQLPullBefore, []any{1234, afters, untils, 51}, []string{"_conv_seq on msg_content_r"}},
		{"read count", store.SQLReadCount, []any{1234, 5}, []string{"conv_member_pkey", "_conv_seq on msg_content_r"}},
		{"trace", store.SQLTraceRecipients, []any{1234, 5, ids.AtTime(time.Now()) + 123405}, []string{"conv_member_pkey", "_msg_id_idx on inbox_archive_r"}},
	} {
		rows, err := st.Pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		plan := strings.Join(lines, "\n")
		t.Logf("%s plan:\n%s", q.name, plan)
		for _, index := range q.using {
			if !strings.Contains(plan, index) {
				t.Errorf("%s does not use %s:\n%s", q.name, index, plan)
			}
		}
		if scans := seqScansOfRows(t, st, plan); len(scans) > 0 {
			t.Errorf("%s scans %v:\n%s", q.name, scans, plan)
		}
	}
}
