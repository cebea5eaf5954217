package sqlitestore

import (
	"context"

	"github.com/helmr-go/helmr/internal/store"
)

// Slack (migration 0016_slack).

const slackAppCols = `id, name, team_id, bot_user_id, mode, mention_agent, sealed, created_at`

func scanSlackApp(sc interface{ Scan(...any) error }) (*store.SlackApp, error) {
	var a store.SlackApp
	var created int64
	if err := sc.Scan(&a.ID, &a.Name, &a.TeamID, &a.BotUserID, &a.Mode, &a.MentionAgent, &a.Sealed, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMicros(created)
	return &a, nil
}

func (t *tx) InsertSlackApp(ctx context.Context, a *store.SlackApp) error {
	return t.exec(ctx, `INSERT INTO slack_apps(`+slackAppCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Name, a.TeamID, a.BotUserID, a.Mode, a.MentionAgent, a.Sealed, micros(a.CreatedAt))
}

func (t *tx) GetSlackApp(ctx context.Context, id string) (*store.SlackApp, error) {
	return queryOne(ctx, t, scanSlackApp, `SELECT `+slackAppCols+` FROM slack_apps WHERE id = ?`, id)
}

func (t *tx) GetSlackAppByTeam(ctx context.Context, teamID string) (*store.SlackApp, error) {
	return queryOne(ctx, t, scanSlackApp, `SELECT `+slackAppCols+` FROM slack_apps WHERE team_id = ?`, teamID)
}

func (t *tx) ListSlackApps(ctx context.Context) ([]store.SlackApp, error) {
	return queryAll(ctx, t, scanSlackApp, `SELECT `+slackAppCols+` FROM slack_apps ORDER BY id`)
}

func (t *tx) DeleteSlackApp(ctx context.Context, id string) error {
	return t.updateRow(ctx, `DELETE FROM slack_apps WHERE id = ?`, id)
}

const slackUserCols = `team_id, user_id, identity, role, created_at`

func scanSlackUser(sc interface{ Scan(...any) error }) (*store.SlackUser, error) {
	var u store.SlackUser
	var created int64
	if err := sc.Scan(&u.TeamID, &u.UserID, &u.Identity, &u.Role, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = fromMicros(created)
	return &u, nil
}

func (t *tx) PutSlackUser(ctx context.Context, u *store.SlackUser) error {
	return t.exec(ctx, `INSERT OR REPLACE INTO slack_users(`+slackUserCols+`) VALUES (?, ?, ?, ?, ?)`,
		u.TeamID, u.UserID, u.Identity, u.Role, micros(u.CreatedAt))
}

func (t *tx) GetSlackUser(ctx context.Context, teamID, userID string) (*store.SlackUser, error) {
	return queryOne(ctx, t, scanSlackUser, `SELECT `+slackUserCols+` FROM slack_users WHERE team_id = ? AND user_id = ?`, teamID, userID)
}

func (t *tx) ListSlackUsers(ctx context.Context, teamID string) ([]store.SlackUser, error) {
	return queryAll(ctx, t, scanSlackUser, `SELECT `+slackUserCols+` FROM slack_users WHERE ? = '' OR team_id = ? ORDER BY team_id, user_id`, teamID, teamID)
}

func (t *tx) DeleteSlackUser(ctx context.Context, teamID, userID string) error {
	return t.updateRow(ctx, `DELETE FROM slack_users WHERE team_id = ? AND user_id = ?`, teamID, userID)
}

const slackThreadCols = `session_id, app_id, channel_id, thread_ts, cursor, done, created_at`

func scanSlackThread(sc interface{ Scan(...any) error }) (*store.SlackThread, error) {
	var th store.SlackThread
	var created int64
	if err := sc.Scan(&th.SessionID, &th.AppID, &th.ChannelID, &th.ThreadTS, &th.Cursor, &th.Done, &created); err != nil {
		return nil, err
	}
	th.CreatedAt = fromMicros(created)
	return &th, nil
}

func (t *tx) InsertSlackThread(ctx context.Context, th *store.SlackThread) error {
	return t.exec(ctx, `INSERT INTO slack_threads(`+slackThreadCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		th.SessionID, th.AppID, th.ChannelID, th.ThreadTS, th.Cursor, th.Done, micros(th.CreatedAt))
}

func (t *tx) GetSlackThread(ctx context.Context, sessionID string) (*store.SlackThread, error) {
	return queryOne(ctx, t, scanSlackThread, `SELECT `+slackThreadCols+` FROM slack_threads WHERE session_id = ?`, sessionID)
}

func (t *tx) GetSlackThreadByTS(ctx context.Context, appID, channelID, threadTS string) (*store.SlackThread, error) {
	return queryOne(ctx, t, scanSlackThread, `SELECT `+slackThreadCols+` FROM slack_threads
 WHERE app_id = ? AND channel_id = ? AND thread_ts = ? AND (thread_ts <> '' OR done = 0) ORDER BY session_id LIMIT 1`, appID, channelID, threadTS)
}

func (t *tx) UpdateSlackThread(ctx context.Context, th *store.SlackThread) error {
	return t.updateRow(ctx, `UPDATE slack_threads SET thread_ts = ?, cursor = ?, done = ? WHERE session_id = ?`,
		th.ThreadTS, th.Cursor, th.Done, th.SessionID)
}

func (t *tx) ListSlackThreads(ctx context.Context, afterSessionID string, limit int) ([]store.SlackThread, error) {
	return queryAll(ctx, t, scanSlackThread, `SELECT `+slackThreadCols+` FROM slack_threads
 WHERE done = 0 AND session_id > ? ORDER BY session_id LIMIT ?`, afterSessionID, limit)
}

func (t *tx) PutSlackPost(ctx context.Context, p *store.SlackPost) error {
	return t.exec(ctx, `INSERT OR REPLACE INTO slack_posts(session_id, key, ts, text, updated_at) VALUES (?, ?, ?, ?, ?)`,
		p.SessionID, p.Key, p.TS, p.Text, micros(p.UpdatedAt))
}

func (t *tx) GetSlackPost(ctx context.Context, sessionID, key string) (*store.SlackPost, error) {
	return queryOne(ctx, t, func(sc interface{ Scan(...any) error }) (*store.SlackPost, error) {
		var p store.SlackPost
		var at int64
		if err := sc.Scan(&p.SessionID, &p.Key, &p.TS, &p.Text, &at); err != nil {
			return nil, err
		}
		p.UpdatedAt = fromMicros(at)
		return &p, nil
	}, `SELECT session_id, key, ts, text, updated_at FROM slack_posts WHERE session_id = ? AND key = ?`, sessionID, key)
}
