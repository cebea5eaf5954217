package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// Slack (migration 0016_slack). Threads and posts take their Session's
// lock; apps and users take none.

const slackAppCols = `id, name, team_id, bot_user_id, mode, mention_agent, sealed, created_at`

func scanSlackApp(row pgx.Row) (*store.SlackApp, error) {
	var a store.SlackApp
	if err := row.Scan(&a.ID, &a.Name, &a.TeamID, &a.BotUserID, &a.Mode, &a.MentionAgent, &a.Sealed, &a.CreatedAt); err != nil {
		return nil, err
	}
	a.CreatedAt = utc(a.CreatedAt)
	return &a, nil
}

func (t *tx) InsertSlackApp(ctx context.Context, a *store.SlackApp) error {
	return t.insert(ctx, nil, `INSERT INTO slack_apps(`+slackAppCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		a.ID, a.Name, a.TeamID, a.BotUserID, a.Mode, a.MentionAgent, a.Sealed, a.CreatedAt)
}

func (t *tx) GetSlackApp(ctx context.Context, id string) (*store.SlackApp, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+slackAppCols+` FROM slack_apps WHERE id = $1`, id), scanSlackApp)
}

func (t *tx) GetSlackAppByTeam(ctx context.Context, teamID string) (*store.SlackApp, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+slackAppCols+` FROM slack_apps WHERE team_id = $1`, teamID), scanSlackApp)
}

func (t *tx) ListSlackApps(ctx context.Context) ([]store.SlackApp, error) {
	rows, err := t.q.Query(ctx, `SELECT `+slackAppCols+` FROM slack_apps ORDER BY id`)
	return collect(rows, err, scanSlackApp)
}

func (t *tx) DeleteSlackApp(ctx context.Context, id string) error {
	return t.updateRow(ctx, `DELETE FROM slack_apps WHERE id = $1`, id)
}

const slackUserCols = `team_id, user_id, identity, role, created_at`

func scanSlackUser(row pgx.Row) (*store.SlackUser, error) {
	var u store.SlackUser
	if err := row.Scan(&u.TeamID, &u.UserID, &u.Identity, &u.Role, &u.CreatedAt); err != nil {
		return nil, err
	}
	u.CreatedAt = utc(u.CreatedAt)
	return &u, nil
}

func (t *tx) PutSlackUser(ctx context.Context, u *store.SlackUser) error {
	return t.exec(ctx, "", `INSERT INTO slack_users(`+slackUserCols+`) VALUES ($1, $2, $3, $4, $5)
 ON CONFLICT (team_id, user_id) DO UPDATE SET identity = EXCLUDED.identity, role = EXCLUDED.role, created_at = EXCLUDED.created_at`,
		u.TeamID, u.UserID, u.Identity, u.Role, u.CreatedAt)
}

func (t *tx) GetSlackUser(ctx context.Context, teamID, userID string) (*store.SlackUser, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+slackUserCols+` FROM slack_users WHERE team_id = $1 AND user_id = $2`, teamID, userID), scanSlackUser)
}

func (t *tx) ListSlackUsers(ctx context.Context, teamID string) ([]store.SlackUser, error) {
	rows, err := t.q.Query(ctx, `SELECT `+slackUserCols+` FROM slack_users WHERE $1 = '' OR team_id = $1 ORDER BY team_id, user_id`, teamID)
	return collect(rows, err, scanSlackUser)
}

func (t *tx) DeleteSlackUser(ctx context.Context, teamID, userID string) error {
	return t.updateRow(ctx, `DELETE FROM slack_users WHERE team_id = $1 AND user_id = $2`, teamID, userID)
}

const slackThreadCols = `session_id, app_id, channel_id, thread_ts, cursor, done, created_at`

func scanSlackThread(row pgx.Row) (*store.SlackThread, error) {
	var th store.SlackThread
	if err := row.Scan(&th.SessionID, &th.AppID, &th.ChannelID, &th.ThreadTS, &th.Cursor, &th.Done, &th.CreatedAt); err != nil {
		return nil, err
	}
	th.CreatedAt = utc(th.CreatedAt)
	return &th, nil
}

func (t *tx) InsertSlackThread(ctx context.Context, th *store.SlackThread) error {
	return t.insert(ctx, []string{th.SessionID}, `INSERT INTO slack_threads(`+slackThreadCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		th.SessionID, th.AppID, th.ChannelID, th.ThreadTS, th.Cursor, th.Done, th.CreatedAt)
}

func (t *tx) GetSlackThread(ctx context.Context, sessionID string) (*store.SlackThread, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+slackThreadCols+` FROM slack_threads WHERE session_id = $1`, sessionID), scanSlackThread)
}

func (t *tx) GetSlackThreadByTS(ctx context.Context, appID, channelID, threadTS string) (*store.SlackThread, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+slackThreadCols+` FROM slack_threads
 WHERE app_id = $1 AND channel_id = $2 AND thread_ts = $3 AND (thread_ts <> '' OR NOT done) ORDER BY session_id LIMIT 1`, appID, channelID, threadTS), scanSlackThread)
}

func (t *tx) UpdateSlackThread(ctx context.Context, th *store.SlackThread) error {
	if err := t.lock(ctx, th.SessionID); err != nil {
		return err
	}
	// A unique violation would spoil the transaction: look first.
	if th.ThreadTS != "" {
		var n int
		if err := t.one(ctx, `SELECT count(*) FROM slack_threads WHERE app_id = (SELECT app_id FROM slack_threads WHERE session_id = $1)
 AND channel_id = (SELECT channel_id FROM slack_threads WHERE session_id = $1) AND thread_ts = $2 AND session_id <> $1`,
			[]any{th.SessionID, th.ThreadTS}, &n); err != nil {
			return err
		}
		if n > 0 {
			return store.ErrDuplicate
		}
	}
	return t.updateRow(ctx, `UPDATE slack_threads SET thread_ts = $1, cursor = $2, done = $3 WHERE session_id = $4`,
		th.ThreadTS, th.Cursor, th.Done, th.SessionID)
}

func (t *tx) ListSlackThreads(ctx context.Context, afterSessionID string, limit int) ([]store.SlackThread, error) {
	rows, err := t.q.Query(ctx, `SELECT `+slackThreadCols+` FROM slack_threads
 WHERE NOT done AND session_id > $1 ORDER BY session_id LIMIT $2`, afterSessionID, limit)
	return collect(rows, err, scanSlackThread)
}

func (t *tx) PutSlackPost(ctx context.Context, p *store.SlackPost) error {
	return t.exec(ctx, p.SessionID, `INSERT INTO slack_posts(session_id, key, ts, text, updated_at) VALUES ($1, $2, $3, $4, $5)
 ON CONFLICT (session_id, key) DO UPDATE SET ts = EXCLUDED.ts, text = EXCLUDED.text, updated_at = EXCLUDED.updated_at`,
		p.SessionID, p.Key, p.TS, p.Text, p.UpdatedAt)
}

func (t *tx) GetSlackPost(ctx context.Context, sessionID, key string) (*store.SlackPost, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT session_id, key, ts, text, updated_at FROM slack_posts WHERE session_id = $1 AND key = $2`,
		sessionID, key), func(row pgx.Row) (*store.SlackPost, error) {
		var p store.SlackPost
		if err := row.Scan(&p.SessionID, &p.Key, &p.TS, &p.Text, &p.UpdatedAt); err != nil {
			return nil, err
		}
		p.UpdatedAt = utc(p.UpdatedAt)
		return &p, nil
	})
}
