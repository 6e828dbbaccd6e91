package fargatetest

import (
	"net/http"
	"regexp"
	"strings"
	"time"
)

const secretsTargetPrefix = "secretsmanager."

// Secrets Manager uses PascalCase member names.
type smTag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

type secret struct {
	arn, name, description, kmsKeyID string
	value                            string
	tags                             []smTag
	token                            string
	created                          time.Time
	deleted                          time.Time // scheduled for deletion (with a recovery window)
}

var secretNameRE = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)

func (s *Server) serveSecrets(w http.ResponseWriter, r *http.Request) {
	action, body, ok := s.jsonRequest(w, r, secretsTargetPrefix, "secretsmanager")
	if !ok {
		return
	}
	var out any
	var aerr *apiError
	switch action {
	case "CreateSecret":
		out, aerr = s.createSecret(body)
	case "DescribeSecret":
		out, aerr = s.describeSecret(body)
	case "DeleteSecret":
		out, aerr = s.deleteSecret(body)
	case "ListSecrets":
		out, aerr = s.listSecrets(body)
	default:
		aerr = clientErr("UnknownOperationException", "the fake does not implement %s", action)
	}
	lose := s.takeLoss("secretsmanager:" + action)
	s.mu.Unlock()
	if lose != nil {
		answerLoss(w, lose, writeJSONError)
		return
	}
	if aerr != nil {
		writeJSONError(w, aerr)
		return
	}
	writeJSON(w, out)
}

// secretByRef finds a secret by name, by ARN, or by an ECS valueFrom (an
// ARN followed by ":json-key:version-stage:version-id").
func (s *Server) secretByRef(ref string) *secret {
	if sec, ok := s.secrets[ref]; ok {
		return sec
	}
	for _, sec := range s.secrets {
		if ref == sec.arn || strings.HasPrefix(ref, sec.arn+":") {
			return sec
		}
	}
	return nil
}

func (s *Server) createSecret(body []byte) (any, *apiError) {
	var in struct {
		Name               string  `json:"Name"`
		ClientRequestToken string  `json:"ClientRequestToken"`
		Description        string  `json:"Description"`
		KmsKeyID           string  `json:"KmsKeyId"`
		SecretString       *string `json:"SecretString"`
		SecretBinary       []byte  `json:"SecretBinary"`
		Tags               []smTag `json:"Tags"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	if !secretNameRE.MatchString(in.Name) {
		return nil, clientErr("ValidationException", "Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!")
	}
	if in.ClientRequestToken != "" && (len(in.ClientRequestToken) < 32 || len(in.ClientRequestToken) > 64) {
		return nil, clientErr("ValidationException", "ClientRequestToken must be 32 to 64 characters")
	}
	if in.SecretString == nil && in.SecretBinary == nil {
		return nil, clientErr("InvalidRequestException", "You must provide either SecretString or SecretBinary.")
	}
	if len(in.Tags) > 50 {
		return nil, clientErr("ValidationException", "at most 50 tags")
	}
	if old, ok := s.secrets[in.Name]; ok {
		if in.ClientRequestToken != "" && old.token == in.ClientRequestToken && in.SecretString != nil && *in.SecretString == old.value && old.deleted.IsZero() {
			// Idempotency: a repeated request (same token, same value)
			// is ignored and answers as the first did.
			return map[string]any{"ARN": old.arn, "Name": old.name, "VersionId": old.token}, nil
		}
		if !old.deleted.IsZero() {
			return nil, clientErr("InvalidRequestException", "You can't create this secret because a secret with this name is already scheduled for deletion.")
		}
		return nil, clientErr("ResourceExistsException", "The operation failed because the secret %s already exists.", in.Name)
	}
	sec := &secret{
		name: in.Name, description: in.Description, kmsKeyID: in.KmsKeyID, tags: in.Tags,
		token: in.ClientRequestToken, created: s.now(),
	}
	if in.SecretString != nil {
		sec.value = *in.SecretString
	}
	sec.arn = "arn:aws:secretsmanager:" + s.Region + ":" + s.Account + ":secret:" + in.Name + "-" + randomHex(6)
	s.secrets[in.Name] = sec
	version := in.ClientRequestToken
	if version == "" {
		version = requestID()
	}
	return map[string]any{"ARN": sec.arn, "Name": sec.name, "VersionId": version}, nil
}

func (s *Server) describeSecret(body []byte) (any, *apiError) {
	var in struct {
		SecretID string `json:"SecretId"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	sec := s.secretByRef(in.SecretID)
	if sec == nil {
		return nil, clientErr("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	out := map[string]any{
		"ARN": sec.arn, "Name": sec.name, "Description": sec.description,
		"Tags": sec.tags, "CreatedDate": epoch(sec.created), "LastChangedDate": epoch(sec.created),
	}
	if sec.kmsKeyID != "" {
		out["KmsKeyId"] = sec.kmsKeyID
	}
	if !sec.deleted.IsZero() {
		out["DeletedDate"] = epoch(sec.deleted)
	}
	return out, nil
}

func (s *Server) deleteSecret(body []byte) (any, *apiError) {
	var in struct {
		SecretID                   string `json:"SecretId"`
		RecoveryWindowInDays       *int   `json:"RecoveryWindowInDays"`
		ForceDeleteWithoutRecovery bool   `json:"ForceDeleteWithoutRecovery"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	if in.RecoveryWindowInDays != nil && in.ForceDeleteWithoutRecovery {
		return nil, clientErr("InvalidParameterException", "You can't use ForceDeleteWithoutRecovery in conjunction with RecoveryWindowInDays.")
	}
	sec := s.secretByRef(in.SecretID)
	if sec == nil {
		return nil, clientErr("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	now := s.now()
	if in.ForceDeleteWithoutRecovery {
		delete(s.secrets, sec.name)
	} else {
		sec.deleted = now
	}
	return map[string]any{"ARN": sec.arn, "Name": sec.name, "DeletionDate": epoch(now)}, nil
}

// Secret is a snapshot of one secret.
type Secret struct {
	ARN, Name, Value, KMSKeyID string
	Tags                       map[string]string
	ScheduledForDeletion       bool
}

// Secrets returns every secret the fake holds (a force-deleted one is gone).
func (s *Server) Secrets() []Secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Secret
	for _, name := range sortedKeys(s.secrets) {
		sec := s.secrets[name]
		tags := map[string]string{}
		for _, t := range sec.tags {
			tags[t.Key] = t.Value
		}
		out = append(out, Secret{ARN: sec.arn, Name: sec.name, Value: sec.value, KMSKeyID: sec.kmsKeyID, Tags: tags, ScheduledForDeletion: !sec.deleted.IsZero()})
	}
	return out
}

// PutSecret stores a secret as someone else would have made it.
func (s *Server) PutSecret(name, value string, tags map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := &secret{name: name, value: value, created: time.Now()}
	for _, k := range sortedKeys(tags) {
		sec.tags = append(sec.tags, smTag{Key: k, Value: tags[k]})
	}
	sec.arn = "arn:aws:secretsmanager:" + s.Region + ":" + s.Account + ":secret:" + name + "-" + randomHex(6)
	s.secrets[name] = sec
	return sec.arn
}

// DeleteSecret removes a secret as someone else would have.
func (s *Server) DeleteSecret(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.secrets, name)
}
