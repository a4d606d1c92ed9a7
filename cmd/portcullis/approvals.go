package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

func approvalsCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{Use: "approvals", Short: "Decide executions of per_use tools (through a running gateway's API)"}
	cmd.PersistentFlags().StringVar(&addr, "addr", "http://127.0.0.1:8080", "gateway API base URL")
	httpClient := apiFlags(cmd, true)
	client := func() (portcullisv1connect.ApprovalServiceClient, error) {
		hc, err := httpClient()
		if err != nil {
			return nil, err
		}
		return portcullisv1connect.NewApprovalServiceClient(hc, addr), nil
	}

	list := &cobra.Command{
		Use: "list", Short: "List executions waiting for approval, with their original records", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			res, err := c.ListPending(cmd.Context(), connect.NewRequest(&pb.ListPendingRequest{}))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(res.Msg.GetExecutions()) == 0 {
				fmt.Fprintln(w, "nothing waits for approval")
			}
			for _, x := range res.Msg.GetExecutions() {
				fmt.Fprintf(w, "%s  %s  actor %s  accepted %s  retries attached %d\n  %s\n",
					x.GetExecutionId(), x.GetTool(), x.GetActor(), x.GetAcceptedAt().AsTime().Format("2006-01-02 15:04:05Z07:00"),
					x.GetAttachCount(), x.GetCanonicalRecord())
			}
			return nil
		},
	}
	var by, reason string
	approve := &cobra.Command{
		Use: "approve EXECUTION_ID", Short: "Approve a pending execution", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			res, err := c.Approve(cmd.Context(), connect.NewRequest(&pb.ApproveRequest{ExecutionId: args[0], By: by}))
			if err != nil {
				return err
			}
			x := res.Msg.GetExecution()
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s by %s\n", x.GetExecutionId(), x.GetState(), x.GetAuthorizedBy())
			return nil
		},
	}
	deny := &cobra.Command{
		Use: "deny EXECUTION_ID", Short: "Deny a pending execution", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			res, err := c.Deny(cmd.Context(), connect.NewRequest(&pb.ApprovalServiceDenyRequest{ExecutionId: args[0], By: by, Reason: reason}))
			if err != nil {
				return err
			}
			x := res.Msg.GetExecution()
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s by %s\n", x.GetExecutionId(), x.GetState(), x.GetAuthorizedBy())
			return nil
		},
	}
	for _, c := range []*cobra.Command{approve, deny} {
		c.Flags().StringVar(&by, "by", "", "who decides: optional, and refused unless it is the caller the token authenticates (the gateway records the caller)")
	}
	deny.Flags().StringVar(&reason, "reason", "", "why")
	cmd.AddCommand(list, approve, deny)
	return cmd
}
