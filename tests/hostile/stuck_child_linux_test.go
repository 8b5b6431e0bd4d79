package hostile

import (
	"context"
	"fmt"
	"time"

	"github.com/vnic/vnic/client"
)

// stuck attaches one tenant (p.Attach) and never takes a packet from it:
// once the buffers it posted at attach are used, every frame it claims
// finds its Ax ring empty. Under --policy pause that is a tenant that
// would hold the wire for ever.
func stuck(sock string, p params) (string, func() string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ten, err := client.Attach(ctx, sock, p.Attach)
	if err != nil {
		return "attach: " + err.Error(), func() string { return "" }
	}
	return fmt.Sprintf("tenant %d attached, never receiving", ten.ID), func() string {
		ten.Close()
		return "detached"
	}
}
