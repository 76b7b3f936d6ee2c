package executionsapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	executionspb "cloud.google.com/go/workflows/executions/apiv1/executionspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"billrun.dev/billrun/internal/workflow"
)

// maxBodyBytes bounds a REST request body: an Execution with a 32 KB argument
// fits with room to spare.
const maxBodyBytes = 1 << 20

const executionsPath = "/v1/projects/{project}/locations/{location}/workflows/{workflow}/executions"

// restHandler routes the REST API (JSON as Google's REST reference defines it).
func (s *Server) restHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+executionsPath, func(w http.ResponseWriter, r *http.Request) {
		x := &executionspb.Execution{}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
		if err == nil && len(body) > 0 {
			err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(body, x)
		}
		if err != nil {
			writeError(w, status.Errorf(codes.InvalidArgument, "invalid execution: %v", err))
			return
		}
		m, err := s.CreateExecution(r.Context(), &executionspb.CreateExecutionRequest{Parent: parent(r), Execution: x})
		writeProto(w, m, err)
	})
	mux.HandleFunc("GET "+executionsPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		size, _ := strconv.Atoi(q.Get("pageSize"))
		m, err := s.ListExecutions(r.Context(), &executionspb.ListExecutionsRequest{
			Parent: parent(r), PageSize: int32(size), PageToken: q.Get("pageToken"),
			View: view(q.Get("view")), Filter: q.Get("filter"), OrderBy: q.Get("orderBy"),
		})
		writeProto(w, m, err)
	})
	// "{id}", "{id}:cancel" and "{id}/stepEntries" share one pattern: a
	// wildcard must be a whole path segment.
	mux.HandleFunc(executionsPath+"/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		rest := r.PathValue("rest")
		name := parent(r) + "/executions/"
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(rest, ":cancel"):
			m, err := s.CancelExecution(r.Context(), &executionspb.CancelExecutionRequest{Name: name + strings.TrimSuffix(rest, ":cancel")})
			writeProto(w, m, err)
		case r.Method == http.MethodGet && strings.HasSuffix(rest, "/stepEntries"):
			s.stepEntries(w, r, name+strings.TrimSuffix(rest, "/stepEntries"))
		case r.Method == http.MethodGet && !strings.ContainsAny(rest, ":/"):
			m, err := s.GetExecution(r.Context(), &executionspb.GetExecutionRequest{Name: name + rest, View: view(r.URL.Query().Get("view"))})
			writeProto(w, m, err)
		default:
			writeError(w, status.Errorf(codes.NotFound, "no method %s %s", r.Method, r.URL.Path))
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, status.Errorf(codes.NotFound, "no method %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func parent(r *http.Request) string {
	return "projects/" + r.PathValue("project") + "/locations/" + r.PathValue("location") + "/workflows/" + r.PathValue("workflow")
}

func view(v string) executionspb.ExecutionView {
	return executionspb.ExecutionView(executionspb.ExecutionView_value[v])
}

// stepEntries serves the step history of an execution, oldest first, in
// Google's StepEntry JSON.
func (s *Server) stepEntries(w http.ResponseWriter, r *http.Request, name string) {
	id, err := idOf(name)
	if err != nil {
		writeError(w, err)
		return
	}
	steps, err := s.svc.Steps(id)
	if err != nil {
		writeError(w, grpcError(err))
		return
	}
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get("pageSize"))
	page, next, err := paginate(len(steps), size, q.Get("pageToken"), maxPageSizeBasic)
	if err != nil {
		writeError(w, err)
		return
	}
	entries := make([]map[string]any, 0, page[1]-page[0])
	for _, e := range steps[page[0]:page[1]] {
		entries = append(entries, stepEntryJSON(name, e))
	}
	resp := map[string]any{"stepEntries": entries, "totalSize": len(steps)}
	if next != "" {
		resp["nextPageToken"] = next
	}
	writeJSON(w, http.StatusOK, resp)
}

func stepEntryJSON(execution string, e workflow.StepEntry) map[string]any {
	m := map[string]any{
		"name":       execution + "/stepEntries/" + strconv.FormatInt(e.EntryID, 10),
		"createTime": e.Start.UTC().Format(time.RFC3339Nano),
		"updateTime": e.End.UTC().Format(time.RFC3339Nano),
		"routine":    e.Routine,
		"step":       e.Step,
		"stepType":   e.StepType,
		"entryId":    strconv.FormatInt(e.EntryID, 10),
		"state":      e.State,
	}
	if e.Error != nil {
		payload, _ := json.Marshal(e.Error)
		m["exception"] = map[string]any{"payload": string(payload)}
	}
	return m
}

// writeProto writes a call's result as JSON, or its error as Google's error
// JSON.
func writeProto(w http.ResponseWriter, m proto.Message, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		writeError(w, status.Error(codes.Internal, err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(b)
}

// httpStatus maps gRPC codes to HTTP statuses as Google's APIs do.
var httpStatus = map[codes.Code]int{
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.NotFound:           http.StatusNotFound,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.Internal:           http.StatusInternalServerError,
}

// writeError writes Google's error JSON: {"error": {code, message, status}}.
func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	code, ok := httpStatus[st.Code()]
	if !ok {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, map[string]any{"error": map[string]any{
		"code": code, "message": st.Message(), "status": statusName(st.Code()),
	}})
}

// statusName is a code's name in Google's JSON errors: NotFound → NOT_FOUND.
func statusName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
