package firestoredb

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"billrun.dev/billrun/internal/store"
)

func TestMapErr(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want error // nil: no sentinel
	}{
		{"not found", context.Background(), status.Error(codes.NotFound, "no entity"), store.ErrNotFound},
		{"already exists", context.Background(), status.Error(codes.AlreadyExists, "exists"), store.ErrAlreadyExists},
		{"aborted", context.Background(), status.Error(codes.Aborted, "contention"), store.ErrConflict},
		{"failed precondition", context.Background(), status.Error(codes.FailedPrecondition, "transaction expired"), store.ErrConflict},
		{"missing index", context.Background(), status.Error(codes.FailedPrecondition, "The query requires an index"), store.ErrInvalid},
		{"unavailable", context.Background(), status.Error(codes.Unavailable, "down"), store.ErrUnavailable},
		{"deadline", context.Background(), status.Error(codes.DeadlineExceeded, "slow"), store.ErrUnavailable},
		{"quota", context.Background(), status.Error(codes.ResourceExhausted, "quota"), store.ErrUnavailable},
		{"invalid argument", context.Background(), status.Error(codes.InvalidArgument, "bad"), store.ErrInvalid},
		{"context canceled", canceled, errors.New("any"), store.ErrUnavailable},
		{"other", context.Background(), status.Error(codes.Internal, "boom"), nil},
	}
	sentinels := []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrConflict, store.ErrUnavailable, store.ErrInvalid}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mapErr(tc.ctx, "op", tc.err)
			if !errors.Is(got, tc.err) {
				t.Errorf("%v does not wrap the original error", got)
			}
			for _, s := range sentinels {
				if errors.Is(got, s) != (s == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", got, s, !(s == tc.want))
				}
			}
			// The client retries a transaction on Aborted: wrapping must keep the code.
			if status.Code(tc.err) == codes.Aborted && status.Code(got) != codes.Aborted {
				t.Errorf("status code of %v is %v, want Aborted", got, status.Code(got))
			}
		})
	}
}
