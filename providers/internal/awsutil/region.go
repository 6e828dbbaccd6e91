package awsutil

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"
)

// RegionEnv is the environment variable the AWS SDK takes the region from
// first.
const RegionEnv = "AWS_REGION"

// ErrNoRegion is Region's error when neither the backend's key nor the
// SDK's settings name a region.
var ErrNoRegion = errors.New("no AWS region")

// Region is the region a backend's clients are made for: the configured
// one (its key, such as providers.ec2.region) when set, which wins over
// the SDK's settings; else the one those give, in the SDK's order:
// AWS_REGION, AWS_DEFAULT_REGION, then the region of the profile
// (AWS_PROFILE, or default) in the shared config file (AWS_CONFIG_FILE or
// ~/.aws/config). Instance metadata is not asked (the SDK asks it only
// when told to): this reads the environment and files alone. The errors
// name key, for the operator to set it or the environment variable.
func Region(ctx context.Context, configured, key string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return "", fmt.Errorf("%s is not set, and the AWS SDK's settings that could name the region cannot be read: %w", key, err)
	}
	if cfg.Region == "" {
		return "", fmt.Errorf("%s is not set and the AWS SDK's settings give none (%w): set %s, or the %s environment variable (AWS_DEFAULT_REGION and the region of the AWS profile are read too)",
			key, ErrNoRegion, key, RegionEnv)
	}
	return cfg.Region, nil
}

// RegionProblems is a backend's configuration check of its region: a
// configuration that gives none, and whose SDK settings give none either,
// is refused before the backend is made.
func RegionProblems(configured, key string) []string {
	if _, err := Region(context.Background(), configured, key); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// ResolvedRegion is the region a backend's registration reports: the one
// Region resolves, "" when there is none (which RegionProblems refuses).
func ResolvedRegion(configured, key string) string {
	r, _ := Region(context.Background(), configured, key)
	return r
}
