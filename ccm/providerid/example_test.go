package providerid_test

import (
	"errors"
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
)

func ExampleToServerID() {
	id, err := providerid.ToServerID(providerid.FromServerID(42))
	fmt.Println(id, err)

	_, err = providerid.ToServerID("hrobot://7")
	fmt.Println(errors.Is(err, providerid.ErrUnsupported))
	// Output:
	// 42 <nil>
	// true
}
