package fargatetest

import (
	"net/http"
	"time"
)

// logsTargetPrefix is CloudWatch Logs' JSON 1.1 target prefix.
const logsTargetPrefix = "Logs_20140328."

// logEvent is one line of a log stream.
type logEvent struct {
	at      time.Time
	message string
}

// Log appends lines to a log stream of a log group, as the awslogs driver
// does with a container's output (stream <prefix>/<container>/<task id>).
func (s *Server) Log(group, stream string, lines ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		s.logs = map[string]map[string][]logEvent{}
	}
	if s.logs[group] == nil {
		s.logs[group] = map[string][]logEvent{}
	}
	for _, l := range lines {
		s.logs[group][stream] = append(s.logs[group][stream], logEvent{at: time.Now(), message: l})
	}
}

func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	action, body, ok := s.jsonRequest(w, r, logsTargetPrefix, "logs")
	if !ok {
		return
	}
	var out any
	var aerr *apiError
	switch action {
	case "GetLogEvents":
		out, aerr = s.getLogEvents(body)
	default:
		aerr = clientErr("UnknownOperationException", "the fake does not implement %s", action)
	}
	s.mu.Unlock()
	if aerr != nil {
		writeJSONError(w, aerr)
		return
	}
	writeJSON(w, out)
}

// getLogEvents answers as CloudWatch Logs does without a token: the last
// limit events (up to 10,000) when startFromHead is false, the default,
// the first ones when true, oldest first either way.
func (s *Server) getLogEvents(body []byte) (any, *apiError) {
	var in struct {
		LogGroupName       string `json:"logGroupName"`
		LogGroupIdentifier string `json:"logGroupIdentifier"`
		LogStreamName      string `json:"logStreamName"`
		StartFromHead      bool   `json:"startFromHead"`
		Limit              int    `json:"limit"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	group := in.LogGroupName
	if group == "" {
		group = in.LogGroupIdentifier
	}
	if group == "" || in.LogStreamName == "" {
		return nil, clientErr("InvalidParameterException", "logGroupName and logStreamName are required")
	}
	if in.Limit < 0 || in.Limit > 10000 {
		return nil, clientErr("InvalidParameterException", "limit must be between 1 and 10000")
	}
	streams, ok := s.logs[group]
	if !ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "The specified log group does not exist."}
	}
	events, ok := streams[in.LogStreamName]
	if !ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "The specified log stream does not exist."}
	}
	limit := in.Limit
	if limit == 0 {
		limit = 10000
	}
	if len(events) > limit {
		if in.StartFromHead {
			events = events[:limit]
		} else {
			events = events[len(events)-limit:]
		}
	}
	wire := make([]map[string]any, 0, len(events))
	for _, e := range events {
		wire = append(wire, map[string]any{"timestamp": e.at.UnixMilli(), "message": e.message, "ingestionTime": e.at.UnixMilli()})
	}
	return map[string]any{"events": wire, "nextForwardToken": "f/" + randomHex(16), "nextBackwardToken": "b/" + randomHex(16)}, nil
}
