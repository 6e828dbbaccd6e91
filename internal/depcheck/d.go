package depcheck

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/aws/aws-sdk-go-v2/service/ecr"
	_ "github.com/docker/docker/client"
	_ "github.com/docker/docker/pkg/stdcopy"
	_ "github.com/google/go-containerregistry/pkg/v1/daemon"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/ory/dockertest/v3"
	_ "golang.org/x/oauth2/google"
)
