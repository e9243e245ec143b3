package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// A user deletion removes the user's data step by step. Every step is
// idempotent (run again, it finds less or nothing to do) and records its
// progress in the job's row (user_deletion) before the next begins, and
// the steps that work in batches record it after each batch; a job cut
// short anywhere (a crash, a restart) is resumed by the next syncer that
// looks, at the step it stopped in. The order matters:
//
//   - revoke first, so the user's devices cannot log in again and write
//     cursor rows or consumers back while the job removes them;
//   - memberships next (the way the admin API removes members: the
//     conversation row locked, member_ver raised), so no new message is
//     fanned out to the user, then settle: entries of batches committed
//     before still reach the inbox within the fanout's publish timeout;
//   - the inbox (JetStream) once the archiver has copied past the user's
//     last entry, then the archive, so the archiver cannot write a copy
//     of an entry back after its rows went;
//   - the sent bodies: replaced by a tombstone (kind deleted, no text)
//     unless their conversation is under legal hold, so the other
//     members' pages show the message as deleted at its conv_seq;
//   - verify last: if anything of the user came back (an entry still in
//     flight), the job starts another pass.
var steps = []struct {
	name string
	run  func(*Lifecycle, context.Context, *job) error
}{
	{firstStep, (*Lifecycle).stepRevoke},
	{"memberships", (*Lifecycle).stepMemberships},
	{"settle", (*Lifecycle).stepSettle},
	{"consumers", (*Lifecycle).stepConsumers},
	{"inbox", (*Lifecycle).stepInbox},
	{"archive", (*Lifecycle).stepArchive},
	{"cursors", (*Lifecycle).stepCursors},
	{"bodies", (*Lifecycle).stepBodies},
	{"rejects", (*Lifecycle).stepRejects},
	{"verify", (*Lifecycle).stepVerify},
}

// firstStep is where a job starts, and where another pass starts over.
const firstStep = "revoke"

// Subjects of the admin API and its events that a deletion uses (the
// admin package defines them; it imports this one).
const (
	// revokeSubject revokes every device of a user
	// (inboxd.admin.user.revoke): its tokens issued until now are refused
	// and its connections close.
	revokeSubject = "inboxd.admin.user.revoke"
	// convChanged is admin.SubjectConvChanged.
	convChanged = "inboxd.event.conv.changed"
)

// job is a deletion in progress.
type job struct {
	d    store.UserDeletion
	next string // set by a step that sends the job elsewhere than the following step
	log  *zap.Logger
}

// RequestDeletion asks for uid's data to be deleted (idempotent: a job
// asked for before is returned as it is; with again, a done one starts
// over) and returns the job; a syncer starts it at once.
func (l *Lifecycle) RequestDeletion(ctx context.Context, uid int64, again bool) (store.UserDeletion, error) {
	d, err := l.st.RequestUserDeletion(ctx, uid, again)
	if err != nil {
		return d, err
	}
	if d.State != store.DeletionDone {
		select {
		case l.poke <- struct{}{}:
		default:
		}
	}
	return d, nil
}

// Deletion returns uid's deletion job; found is false when none was asked
// for.
func (l *Lifecycle) Deletion(ctx context.Context, uid int64) (store.UserDeletion, bool, error) {
	return l.st.UserDeletion(ctx, uid)
}

// runDeletions runs unfinished jobs, one at a time, oldest request first,
// at every poke and every Poll, until ctx ends.
func (l *Lifecycle) runDeletions(ctx context.Context) {
	t := time.NewTicker(l.opts.Poll)
	defer t.Stop()
	for {
		uids, err := l.st.UnfinishedDeletions(ctx, 100)
		if err != nil && ctx.Err() == nil {
			l.log.Warn("user deletions: look for unfinished jobs", zap.Error(err))
		}
		for _, uid := range uids {
			if ctx.Err() != nil {
				return
			}
			l.runJob(ctx, uid)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.poke:
		case <-t.C:
		}
	}
}

func lockKey(uid int64) string { return "inboxd.user_deletion." + strconv.FormatInt(uid, 10) }

func stepIndex(name string) int {
	for i, s := range steps {
		if s.name == name {
			return i
		}
	}
	return -1
}

// runJob runs uid's job from its recorded step to the end, unless another
// syncer runs it. A failed step is recorded (error) and retried at the
// next poll; a job whose ctx ends stops where it is, as a crash would,
// and resumes there.
func (l *Lifecycle) runJob(ctx context.Context, uid int64) {
	log := l.log.With(zap.Int64("uid", uid))
	release, ok, err := l.st.TryLock(ctx, lockKey(uid))
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("user deletion: lock", zap.Error(err))
		}
		return
	}
	if !ok {
		log.Debug("user deletion: another syncer runs it")
		return
	}
	defer release()
	d, found, err := l.st.UserDeletion(ctx, uid)
	if err != nil && ctx.Err() == nil {
		log.Warn("user deletion: read the job", zap.Error(err))
	}
	if err != nil || !found || d.State == store.DeletionDone {
		return
	}
	now := time.Now()
	d.Runs++
	if d.State == store.DeletionPending {
		d.State, d.StartedAt, d.Step = store.DeletionRunning, &now, steps[0].name
	}
	if stepIndex(d.Step) < 0 {
		// Recorded by a build with other steps: they are all idempotent,
		// so the safe resumption is from the first.
		log.Warn("user deletion: unknown step recorded; starting over", zap.String("step", d.Step))
		d.Step = steps[0].name
	}
	j := &job{d: d, log: log}
	if err := l.save(ctx, j); err != nil {
		return
	}
	log.Info("user deletion: running", zap.String("step", d.Step), zap.Int("run", d.Runs))
	l.m.deletionRunning.Set(1)
	defer l.m.deletionRunning.Set(0)
	for j.d.Step != "" {
		i := stepIndex(j.d.Step)
		if err := l.checkpoint(ctx, uid, j.d.Step); err != nil {
			return
		}
		j.next = ""
		err := steps[i].run(l, ctx, j)
		if ctx.Err() != nil {
			return // resumes at this step
		}
		if err != nil {
			l.m.deletionErrors.Inc()
			j.d.Error = j.d.Step + ": " + err.Error()
			log.Warn("user deletion: step failed; retrying later", zap.String("step", j.d.Step), zap.Error(err))
			_ = l.save(ctx, j)
			return
		}
		j.d.Error, j.d.Progress.Waiting = "", ""
		switch {
		case j.next != "":
			j.d.Step = j.next
		case i+1 < len(steps):
			j.d.Step = steps[i+1].name
		default:
			j.d.Step = ""
		}
		if j.d.Step == "" {
			fin := time.Now()
			j.d.State, j.d.FinishedAt = store.DeletionDone, &fin
		}
		if err := l.save(ctx, j); err != nil {
			return
		}
	}
	l.m.deletionsDone.Inc()
	p, _ := json.Marshal(j.d.Progress)
	log.Info("user deletion: done", zap.Int("runs", j.d.Runs), zap.ByteString("progress", p))
}

// save records the job's row; a failure is logged (the caller stops: the
// job resumes from what was recorded last).
func (l *Lifecycle) save(ctx context.Context, j *job) error {
	err := l.st.SaveUserDeletion(ctx, j.d)
	if err != nil && ctx.Err() == nil {
		j.log.Warn("user deletion: record progress", zap.Error(err))
	}
	return err
}

// batchDone records a batch's progress and runs the checkpoint hook: a
// job is never further than one batch ahead of its record.
func (l *Lifecycle) batchDone(ctx context.Context, j *job) error {
	if err := l.save(ctx, j); err != nil {
		return err
	}
	return l.checkpoint(ctx, j.d.UID, j.d.Step)
}

// stepRevoke revokes every device of the user through the admin API's
// revocation, so that no old token logs in again. Without a
// revocation service (no responders) the job goes on and says so in
// revoke_note: the user's connected devices then stay connected, and a
// device may log in again with a token issued before.
func (l *Lifecycle) stepRevoke(ctx context.Context, j *job) error {
	body, _ := json.Marshal(struct {
		UID int64 `json:"uid"`
	}{j.d.UID})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := l.nc.RequestWithContext(rctx, revokeSubject, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		j.d.Progress.Revoked = false
		j.d.Progress.RevokeNote = "no revocation service answers " + revokeSubject + ": tokens issued before the deletion still log in"
		j.log.Warn("user deletion: the user's tokens cannot be revoked", zap.String("subject", revokeSubject))
		return nil
	case err != nil:
		return fmt.Errorf("revoke the user's tokens: %w", err)
	case msg.Header.Get(micro.ErrorCodeHeader) != "":
		return fmt.Errorf("revoke the user's tokens: %s %s", msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader))
	}
	j.d.Progress.Revoked, j.d.Progress.RevokeNote = true, ""
	return nil
}

// stepMemberships removes the user from every conversation (current and
// former memberships, with their read state).
func (l *Lifecycle) stepMemberships(ctx context.Context, j *job) error {
	convs, err := l.st.UserConversations(ctx, j.d.UID)
	if err != nil {
		return err
	}
	for i, c := range convs {
		if _, err := l.st.ForgetMember(ctx, c, j.d.UID); err != nil && !errors.Is(err, store.ErrConvNotFound) {
			return err
		}
		// As the admin API does: caches of members listen (correctness
		// does not depend on it: member_ver moved).
		_ = l.nc.Publish(convChanged, []byte(strconv.FormatInt(c, 10)))
		j.d.Progress.Conversations++
		l.m.deleted.WithLabelValues("conversations").Inc()
		if (i+1)%l.batch() == 0 {
			j.log.Debug("user deletion: memberships", zap.Int("done", i+1), zap.Int("of", len(convs)))
			if err := l.batchDone(ctx, j); err != nil {
				return err
			}
		}
	}
	now := time.Now()
	j.d.Progress.MembershipsGoneAt = &now
	return nil
}

// clockSkew bounds how far a fanout's clock (in its msg_ids) may be ahead
// of this syncer's.
const clockSkew = 2 * time.Second

// stepSettle waits for what fanout batches committed before the
// memberships went may still write into the user's inbox: their
// publishes end within the fanout's publish timeout (Settle is above it),
// and a batch retried after that asks the memberships again and skips the
// user. It ends sooner once every message issued in that time is fanned
// out (its publishes acknowledged): then nothing is in flight. (A batch
// of one of the user's conversations held its row lock until it
// committed, and the memberships step took that lock after it: the
// batch's rows are visible here.)
func (l *Lifecycle) stepSettle(ctx context.Context, j *job) error {
	d := l.settle()
	gone := time.Now()
	if t := j.d.Progress.MembershipsGoneAt; t != nil {
		gone = *t
	}
	lo, hi := ids.FirstAt(gone.Add(-d)), ids.FirstAt(gone.Add(clockSkew))
	j.d.Progress.Waiting = "inbox entries in flight (at most " + d.String() + ")"
	_ = l.save(ctx, j)
	for time.Since(gone) < d {
		inFlight, err := l.st.Unfanned(ctx, lo, hi)
		if err != nil {
			return err
		}
		if !inFlight {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (l *Lifecycle) partition(uid int64) (int, string, string) {
	p := ids.Partition(uid, l.opts.Layout.InboxPartitions)
	return p, streams.InboxStream(p), streams.InboxSubject(p, uid)
}

// stepConsumers deletes the user's device consumers: those its cursor
// rows name, and any other of its name (d_<uid>_…) in its partition.
func (l *Lifecycle) stepConsumers(ctx context.Context, j *job) error {
	_, stream, _ := l.partition(j.d.UID)
	cursors, err := l.st.UserCursors(ctx, j.d.UID)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, c := range cursors {
		names[c.Consumer] = true
	}
	s, err := l.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	prefix := "d_" + strconv.FormatInt(j.d.UID, 10) + "_"
	lister := s.ConsumerNames(ctx)
	for name := range lister.Name() {
		if len(name) > len(prefix) && name[:len(prefix)] == prefix {
			names[name] = true
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("consumers of %s: %w", stream, err)
	}
	for name := range names {
		err := s.DeleteConsumer(ctx, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete consumer %s: %w", name, err)
		}
		j.d.Progress.Consumers++
		l.m.deleted.WithLabelValues("consumers").Inc()
	}
	return nil
}

// subjectEntries returns the stream and how many entries subject holds.
func (l *Lifecycle) subjectEntries(ctx context.Context, stream, subject string) (jetstream.Stream, *jetstream.StreamInfo, uint64, error) {
	s, err := l.js.Stream(ctx, stream)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s, info, info.State.Subjects[subject], nil
}

// stepInbox purges the user's inbox subject up to its last entry. It first
// waits until the archiver has copied the partition up to that entry: the
// archiver copies contiguous runs of sequences only, so the purge stays
// behind its mark (no gap ahead of it), and no copy it is about to write
// can bring an entry back into the archive after the next step.
func (l *Lifecycle) stepInbox(ctx context.Context, j *job) error {
	p, stream, subject := l.partition(j.d.UID)
	s, _, n, err := l.subjectEntries(ctx, stream, subject)
	if err != nil || n == 0 {
		return err
	}
	lastMsg, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // purged meanwhile
	}
	if err != nil {
		return fmt.Errorf("last entry of %s in %s: %w", subject, stream, err)
	}
	last := lastMsg.Sequence
	waited := false
	for {
		prog, err := l.st.ArchiveProgress(ctx)
		if err != nil {
			return err
		}
		if prog[p] >= last {
			break
		}
		if !waited {
			waited = true
			j.d.Progress.Waiting = fmt.Sprintf("the archiver: partition %d archived up to %d, the user's last entry is %d", p, prog[p], last)
			_ = l.save(ctx, j)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(last+1)); err != nil {
		return fmt.Errorf("purge %s in %s: %w", subject, stream, err)
	}
	_, _, left, err := l.subjectEntries(ctx, stream, subject)
	if err != nil {
		return err
	}
	gone := int64(n) - int64(left)
	j.d.Progress.InboxEntries += gone
	l.m.deleted.WithLabelValues("inbox_entries").Add(float64(gone))
	j.log.Debug("user deletion: inbox purged", zap.String("stream", stream), zap.Int64("entries", gone), zap.Uint64("up_to", last))
	return nil
}

// stepArchive deletes the user's inbox_archive rows, a batch at a time.
func (l *Lifecycle) stepArchive(ctx context.Context, j *job) error {
	for {
		n, err := l.st.DeleteUserArchive(ctx, j.d.UID, l.batch())
		if err != nil {
			return err
		}
		j.d.Progress.ArchiveRows += n
		l.m.deleted.WithLabelValues("archive_rows").Add(float64(n))
		j.log.Debug("user deletion: archive batch", zap.Int64("rows", n))
		if n < int64(l.batch()) {
			return nil
		}
		if err := l.batchDone(ctx, j); err != nil {
			return err
		}
	}
}

// stepCursors deletes the user's device_cursor rows.
func (l *Lifecycle) stepCursors(ctx context.Context, j *job) error {
	n, err := l.st.DeleteUserCursors(ctx, j.d.UID)
	j.d.Progress.Cursors += n
	l.m.deleted.WithLabelValues("cursors").Add(float64(n))
	return err
}

// stepBodies replaces the bodies the user sent with tombstones, a batch at
// a time, except in conversations under legal hold (counted as held), and
// tells the gateways to drop them from their caches.
func (l *Lifecycle) stepBodies(ctx context.Context, j *job) error {
	for {
		sent, err := l.st.SentMessages(ctx, j.d.UID, j.d.Progress.BodiesAfter, l.batch())
		if err != nil {
			return err
		}
		if len(sent) == 0 {
			return nil
		}
		var convs []int64
		for _, m := range sent {
			if !m.Deleted {
				convs = append(convs, m.ConvID)
			}
		}
		held, err := l.heldConversations(ctx, convs)
		if err != nil {
			return fmt.Errorf("legal holds: %w", err)
		}
		var erase []int64
		for _, m := range sent {
			switch {
			case m.Deleted:
			case held[m.ConvID]:
				j.d.Progress.BodiesHeld++
			default:
				erase = append(erase, m.MsgID)
			}
		}
		erased, err := l.st.TombstoneBodies(ctx, erase)
		if err != nil {
			return err
		}
		if len(erased) > 0 {
			_ = l.nc.Publish(streams.BodiesErased, streams.ErasedIDs(erased))
		}
		// Held meanwhile (a hold set after the check): kept too.
		j.d.Progress.BodiesHeld += int64(len(erase) - len(erased))
		n := int64(len(erased))
		j.d.Progress.Bodies += n
		j.d.Progress.BodiesAfter = sent[len(sent)-1].ClientMsgID
		l.m.deleted.WithLabelValues("bodies").Add(float64(n))
		j.log.Debug("user deletion: bodies batch", zap.Int64("erased", n), zap.Int("sent", len(sent)))
		if err := l.batchDone(ctx, j); err != nil {
			return err
		}
	}
}

// stepRejects deletes the user's send_reject rows, a batch at a time.
func (l *Lifecycle) stepRejects(ctx context.Context, j *job) error {
	for {
		n, err := l.st.DeleteUserRejects(ctx, j.d.UID, l.batch())
		if err != nil {
			return err
		}
		j.d.Progress.Rejects += n
		l.m.deleted.WithLabelValues("rejects").Add(float64(n))
		if n < int64(l.batch()) {
			return nil
		}
		if err := l.batchDone(ctx, j); err != nil {
			return err
		}
	}
}

// stepVerify checks that nothing of the user is left in Postgres and in
// its inbox subject; if something came back, it sends the job through the
// steps again.
func (l *Lifecycle) stepVerify(ctx context.Context, j *job) error {
	r, err := l.st.UserRemains(ctx, j.d.UID)
	if err != nil {
		return err
	}
	_, stream, subject := l.partition(j.d.UID)
	_, _, entries, err := l.subjectEntries(ctx, stream, subject)
	if err != nil {
		return err
	}
	if !r.Any() && entries == 0 {
		return nil
	}
	j.d.Progress.Rounds++
	j.log.Warn("user deletion: data of the user came back; another pass (a device still logged in without a revocation?)",
		zap.Int("pass", j.d.Progress.Rounds), zap.Int64("memberships", r.Members), zap.Int64("cursors", r.Cursors),
		zap.Int64("archive_rows", r.Archive), zap.Uint64("inbox_entries", entries))
	j.next = firstStep
	if j.d.Progress.Rounds < 3 {
		return nil
	}
	// It keeps coming back: something still writes for the user (a
	// device that stays logged in writes its cursor row back). Pass again,
	// less and less often, and say so.
	wait := min(time.Duration(j.d.Progress.Rounds)*l.opts.Poll, time.Minute)
	j.d.Progress.Waiting = fmt.Sprintf("data of the user came back %d times (memberships %d, cursors %d, archive rows %d, inbox entries %d): a device still logged in? next pass in %s",
		j.d.Progress.Rounds, r.Members, r.Cursors, r.Archive, entries, wait)
	_ = l.save(ctx, j)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}
