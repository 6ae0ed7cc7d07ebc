package worker

import "log/slog"

// msgLog logs about one message. The logger with the message's attributes
// is built on first use: most messages log nothing.
type msgLog struct {
	q   *queue
	msg *Message
	l   *slog.Logger
}

// attrs are the attributes of the message's measurements.
func (m *msgLog) attrs() *kindAttrs { return m.q.attrs.of(m.msg.Kind) }

func (m *msgLog) logger() *slog.Logger {
	if m.l == nil {
		m.l = m.q.log.With("message_id", m.msg.MessageID, "attempt", m.msg.Attempt, "fencing_token", m.msg.FencingToken)
	}
	return m.l
}

func (m *msgLog) Debug(msg string, args ...any) { m.logger().Debug(msg, args...) }
func (m *msgLog) Info(msg string, args ...any)  { m.logger().Info(msg, args...) }
func (m *msgLog) Warn(msg string, args ...any)  { m.logger().Warn(msg, args...) }
func (m *msgLog) Error(msg string, args ...any) { m.logger().Error(msg, args...) }
