// Package executionsapi serves Google's Workflow Executions API (v1) for the
// local engine, over REST (as gcloud uses it) and gRPC (as
// cloud.google.com/go/workflows/executions/apiv1 uses it), on one port.
package executionsapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	executionspb "cloud.google.com/go/workflows/executions/apiv1/executionspb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"billrun.dev/billrun/internal/workflow"
)

// Page sizes of list calls [D] rest reference: default and maximum per view.
const (
	defaultPageSize  = 100
	maxPageSizeFull  = 100
	maxPageSizeBasic = 1000
)

// revisionID is the workflowRevisionId of every local execution: a workflow
// file has no revisions locally.
const revisionID = "000001-local"

// Server implements the Executions API over a workflow.Executions service.
type Server struct {
	executionspb.UnimplementedExecutionsServer
	svc  *workflow.Executions
	grpc *grpc.Server
}

var _ executionspb.ExecutionsServer = (*Server)(nil)

// New returns a server for svc.
func New(svc *workflow.Executions) *Server {
	s := &Server{svc: svc, grpc: grpc.NewServer()}
	executionspb.RegisterExecutionsServer(s.grpc, s)
	return s
}

// Handler serves gRPC requests (HTTP/2 with an application/grpc content type)
// and the REST API.
func (s *Server) Handler() http.Handler {
	rest := s.restHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			s.grpc.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// Serve serves on l (HTTP/1.1 and unencrypted HTTP/2) until ctx is done.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return fmt.Errorf("executions api: %w", err)
}

// CreateExecution starts an execution of the parent workflow.
func (s *Server) CreateExecution(_ context.Context, req *executionspb.CreateExecutionRequest) (*executionspb.Execution, error) {
	wf, err := workflowOf(req.GetParent())
	if err != nil {
		return nil, err
	}
	x, err := s.svc.Start(wf, req.GetExecution().GetArgument(), workflow.StartOptions{Labels: req.GetExecution().GetLabels()})
	if err != nil {
		return nil, grpcError(err)
	}
	return toPB(x, executionspb.ExecutionView_FULL), nil
}

// GetExecution returns one execution (FULL view unless BASIC is asked).
func (s *Server) GetExecution(_ context.Context, req *executionspb.GetExecutionRequest) (*executionspb.Execution, error) {
	id, err := idOf(req.GetName())
	if err != nil {
		return nil, err
	}
	x, err := s.svc.Get(id)
	if err != nil {
		return nil, grpcError(err)
	}
	view := req.GetView()
	if view == executionspb.ExecutionView_EXECUTION_VIEW_UNSPECIFIED {
		view = executionspb.ExecutionView_FULL
	}
	return toPB(x, view), nil
}

// ListExecutions lists a workflow's executions, newest first (BASIC view
// unless FULL is asked). Filters and orderings are not supported locally.
func (s *Server) ListExecutions(_ context.Context, req *executionspb.ListExecutionsRequest) (*executionspb.ListExecutionsResponse, error) {
	wf, err := workflowOf(req.GetParent())
	if err != nil {
		return nil, err
	}
	if req.GetFilter() != "" || req.GetOrderBy() != "" {
		return nil, status.Error(codes.InvalidArgument, "filter and orderBy are not supported by the local Executions API")
	}
	view := req.GetView()
	if view == executionspb.ExecutionView_EXECUTION_VIEW_UNSPECIFIED {
		view = executionspb.ExecutionView_BASIC
	}
	limit := maxPageSizeBasic
	if view == executionspb.ExecutionView_FULL {
		limit = maxPageSizeFull
	}
	all := s.svc.List(wf)
	page, next, err := paginate(len(all), int(req.GetPageSize()), req.GetPageToken(), limit)
	if err != nil {
		return nil, err
	}
	resp := &executionspb.ListExecutionsResponse{NextPageToken: next}
	for _, x := range all[page[0]:page[1]] {
		resp.Executions = append(resp.Executions, toPB(x, view))
	}
	return resp, nil
}

// CancelExecution cancels an active execution.
func (s *Server) CancelExecution(_ context.Context, req *executionspb.CancelExecutionRequest) (*executionspb.Execution, error) {
	id, err := idOf(req.GetName())
	if err != nil {
		return nil, err
	}
	x, err := s.svc.Cancel(id)
	if err != nil {
		return nil, grpcError(err)
	}
	return toPB(x, executionspb.ExecutionView_FULL), nil
}

// paginate returns the [start, end) of a page of n items and the next page
// token (a decimal offset).
func paginate(n, size int, token string, limit int) ([2]int, string, error) {
	if size <= 0 {
		size = min(defaultPageSize, limit)
	}
	size = min(size, limit)
	start := 0
	if token != "" {
		var err error
		if start, err = strconv.Atoi(token); err != nil || start < 0 || start > n {
			return [2]int{}, "", status.Errorf(codes.InvalidArgument, "invalid page token %q", token)
		}
	}
	end := min(start+size, n)
	next := ""
	if end < n {
		next = strconv.Itoa(end)
	}
	return [2]int{start, end}, next, nil
}

// workflowOf returns the workflow id of a parent
// "projects/{p}/locations/{l}/workflows/{w}".
func workflowOf(parent string) (string, error) {
	parts := strings.Split(parent, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "workflows" || parts[5] == "" {
		return "", status.Errorf(codes.InvalidArgument, "invalid parent %q: want projects/*/locations/*/workflows/*", parent)
	}
	return parts[5], nil
}

// idOf returns the execution id of a name
// "projects/{p}/locations/{l}/workflows/{w}/executions/{id}".
func idOf(name string) (string, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 8 || parts[6] != "executions" || parts[7] == "" {
		return "", status.Errorf(codes.InvalidArgument, "invalid execution name %q", name)
	}
	if _, err := workflowOf(strings.Join(parts[:6], "/")); err != nil {
		return "", err
	}
	return parts[7], nil
}

// grpcError maps the service's errors onto gRPC codes.
func grpcError(err error) error {
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, workflow.ErrArgumentTooLarge), errors.Is(err, workflow.ErrBadArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, workflow.ErrNotActive), errors.Is(err, workflow.ErrInvalid):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

var states = map[workflow.State]executionspb.Execution_State{
	workflow.StateActive:    executionspb.Execution_ACTIVE,
	workflow.StateSucceeded: executionspb.Execution_SUCCEEDED,
	workflow.StateFailed:    executionspb.Execution_FAILED,
	workflow.StateCancelled: executionspb.Execution_CANCELLED,
}

// toPB converts an execution to the API's message; BASIC has only name,
// times, state and revision [D].
func toPB(x *workflow.Execution, view executionspb.ExecutionView) *executionspb.Execution {
	out := &executionspb.Execution{
		Name:               x.Name(),
		StartTime:          timestamppb.New(x.StartTime),
		State:              states[x.State],
		WorkflowRevisionId: revisionID,
	}
	if !x.EndTime.IsZero() {
		out.EndTime = timestamppb.New(x.EndTime)
		out.Duration = durationpb.New(x.EndTime.Sub(x.StartTime))
	}
	if view == executionspb.ExecutionView_BASIC {
		return out
	}
	if s := x.LastStep; s != nil {
		out.Status = &executionspb.Execution_Status{CurrentSteps: []*executionspb.Execution_Status_Step{{Routine: s.Routine, Step: s.Step}}}
	}
	out.Argument, out.Result, out.Labels = x.Argument, x.Result, x.Labels
	if e := x.Error; e != nil {
		out.Error = &executionspb.Execution_Error{Payload: e.Payload, Context: e.Context}
		if len(e.StackTrace) > 0 {
			st := &executionspb.Execution_StackTrace{}
			for _, f := range e.StackTrace {
				st.Elements = append(st.Elements, &executionspb.Execution_StackTraceElement{
					Step: f.Step, Routine: f.Routine,
					Position: &executionspb.Execution_StackTraceElement_Position{
						Line: int64(f.Line), Column: int64(f.Column), Length: int64(len(f.Step)),
					},
				})
			}
			out.Error.StackTrace = st
		}
	}
	return out
}
