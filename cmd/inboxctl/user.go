package main

import (
	"context"
	"fmt"
)

// userCmd runs `inboxctl user <sub>`: delete (user_delete.go).
func userCmd(ctx context.Context, sub string, args []string) int {
	switch sub {
	case "delete":
		return userDeleteCmd(ctx, args)
	}
	return fail(fmt.Errorf("unknown user command %q: want delete", sub))
}
