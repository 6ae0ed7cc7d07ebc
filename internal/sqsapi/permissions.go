package sqsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
)

// shareableActions are the actions AddPermission may grant, as in SQS:
// those on a queue's messages and the reading of the queue; "*" grants
// all. A grant of an action covers its batch form.
var shareableActions = []string{"*", "ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
	"ListDeadLetterSourceQueues", "ListQueueTags", "PurgeQueue", "ReceiveMessage", "SendMessage"}

// policy is a queue's access policy, an IAM policy document: its members
// as they were given, with its statements read out.
type policy struct {
	doc        map[string]any
	statements []any
}

// parsePolicy reads a Policy attribute: a JSON object whose Statement, if
// any, is a statement or a list of them. "" is no policy.
func parsePolicy(v string) (policy, *apiError) {
	p := policy{doc: map[string]any{}}
	if v == "" {
		return p, nil
	}
	d := json.NewDecoder(strings.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&p.doc); err != nil || p.doc == nil || d.More() {
		return policy{}, errInvalidAttributeValue.f("Invalid value for the parameter Policy: it is not a JSON object.")
	}
	switch st := p.doc["Statement"].(type) {
	case nil:
	case []any:
		p.statements = st
	case map[string]any:
		p.statements = []any{st}
	default:
		return policy{}, errInvalidAttributeValue.f("Invalid value for the parameter Policy: its Statement is neither a statement nor a list of them.")
	}
	return p, nil
}

// find returns the index of the statement whose Sid is label, or -1.
func (p policy) find(label string) int {
	return slices.IndexFunc(p.statements, func(s any) bool {
		m, ok := s.(map[string]any)
		return ok && m["Sid"] == label
	})
}

// encode writes the policy back: "" when it has no statements left.
func (p policy) encode() string {
	if len(p.statements) == 0 {
		return ""
	}
	p.doc["Statement"] = p.statements
	var b bytes.Buffer
	_ = encodeJSON(&b, p.doc) // decoded JSON always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// oneOrList is how IAM writes a list: a lone value alone.
func oneOrList(vs []string) any {
	if len(vs) == 1 {
		return vs[0]
	}
	return vs
}

// isAccountID reports whether s is an AWS account id: 12 digits.
func isAccountID(s string) bool {
	return len(s) == 12 && strings.Trim(s, "0123456789") == ""
}

func (a *API) addPermission(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		Label         string   `json:"Label"`
		AWSAccountIds []string `json:"AWSAccountIds"`
		Actions       []string `json:"Actions"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := checkLabel(in.Label); err != nil {
		return nil, err
	}
	switch {
	case len(in.AWSAccountIds) == 0:
		return nil, errMissingParameter.f("The request must contain the parameter AWSAccountIds.")
	case len(in.Actions) == 0:
		return nil, errMissingParameter.f("The request must contain the parameter Actions.")
	}
	principals := make([]string, len(in.AWSAccountIds))
	for i, id := range in.AWSAccountIds {
		if !isAccountID(id) {
			return nil, errInvalidParameter.f("Value [%s] for parameter PrincipalId is invalid. Reason: it is not an account id of 12 digits.", id)
		}
		principals[i] = "arn:aws:iam::" + id + ":root"
	}
	actions := make([]string, len(in.Actions))
	for i, act := range in.Actions {
		if !slices.Contains(shareableActions, act) {
			return nil, errInvalidParameter.f("Value %s for parameter ActionName is invalid. Reason: only %s may be granted.", act, strings.Join(shareableActions, ", "))
		}
		actions[i] = "SQS:" + act
	}
	return a.changePolicy(ctx, c, in.QueueUrl, func(p *policy, arn string) *apiError {
		if p.find(in.Label) >= 0 {
			return errInvalidParameter.f("Value %s for parameter Label is invalid. Reason: Already exists.", in.Label)
		}
		if len(p.doc) == 0 {
			p.doc = map[string]any{"Version": "2008-10-17", "Id": arn + "/SQSDefaultPolicy"}
		}
		p.statements = append(p.statements, map[string]any{"Sid": in.Label, "Effect": "Allow",
			"Principal": map[string]any{"AWS": oneOrList(principals)}, "Action": oneOrList(actions), "Resource": arn})
		return nil
	})
}

func (a *API) removePermission(ctx context.Context, c *call) (any, error) {
	var in struct {
		queueInput
		Label string `json:"Label"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := checkLabel(in.Label); err != nil {
		return nil, err
	}
	return a.changePolicy(ctx, c, in.QueueUrl, func(p *policy, _ string) *apiError {
		i := p.find(in.Label)
		if i < 0 {
			return errInvalidParameter.f("Value %s for parameter Label is invalid. Reason: can't find label.", in.Label)
		}
		p.statements = slices.Delete(p.statements, i, i+1)
		return nil
	})
}

// checkLabel applies SQS's rules to a permission's label: 1 to 80
// letters, digits, hyphens and underscores.
func checkLabel(label string) *apiError {
	if label == "" {
		return errMissingParameter.f("The request must contain the parameter Label.")
	}
	if len(label) > 80 || !onlyNameChars(label, "") {
		return errInvalidParameter.f("Value %s for parameter Label is invalid. Reason: a label is 1 to 80 alphanumeric characters, hyphens or underscores.", label)
	}
	return nil
}

// changePolicy changes the Policy of the queue queueURL names with
// change, which is given the policy as the store holds it (not as the
// cache does) and the queue's ARN. This server changes one policy at a
// time; servers sharing a database do not wait for each other.
func (a *API) changePolicy(ctx context.Context, c *call, queueURL string, change func(p *policy, arn string) *apiError) (any, error) {
	q, err := a.lookup(ctx, queueURL)
	if err != nil {
		return nil, err
	}
	a.policies.Lock()
	defer a.policies.Unlock()
	rec, err := a.st.QueueInfo(ctx, q.name())
	if err != nil {
		a.forget(q.name())
		return nil, asMissingQueue(err, q.name())
	}
	p, aerr := parsePolicy(rec.Attributes[attrPolicy])
	if aerr != nil {
		return nil, aerr
	}
	if aerr := change(&p, a.queueARN(c.r, q.name())); aerr != nil {
		return nil, aerr
	}
	return a.setAttrs(ctx, q.name(), map[string]string{attrPolicy: p.encode()})
}
