package ec2

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Standard SSM parameters hold up to 4 KB; larger values need the
// (charged) advanced tier, which holds 8 KB.
const (
	standardParameterLimit = 4096
	advancedParameterLimit = 8192
)

// ensureSecret stores the cluster's TLS certificate and key as an
// encrypted SSM parameter, from which members read them at boot: user data
// is readable by anyone allowed ec2:DescribeInstanceAttribute and is kept
// unencrypted, so the key never goes there. Tags can only be given when
// the parameter is created, so a repeat overwrites it without them.
func (p *Provider) ensureSecret(ctx context.Context, spec providers.ClusterSpec) error {
	p.mu.Lock()
	done := p.secrets[spec.Name]
	p.mu.Unlock()
	if done {
		return nil
	}
	if len(spec.TLSCert) == 0 || len(spec.TLSKey) == 0 {
		return fmt.Errorf("ec2 provider: cluster %s has no TLS certificate and key to give its members", spec.Name)
	}
	value := strings.TrimRight(string(spec.TLSCert), "\n") + "\n" + strings.TrimRight(string(spec.TLSKey), "\n") + "\n"
	if len(value) > advancedParameterLimit {
		return fmt.Errorf("ec2 provider: the TLS material of cluster %s is %d bytes, more than an SSM parameter holds (%d)", spec.Name, len(value), advancedParameterLimit)
	}
	tier := ssmtypes.ParameterTierStandard
	if len(value) > standardParameterLimit {
		tier = ssmtypes.ParameterTierAdvanced
	}
	name := p.parameterName(spec.Name)
	in := &ssm.PutParameterInput{
		Name:        aws.String(name),
		Value:       aws.String(value),
		Type:        ssmtypes.ParameterTypeSecureString,
		Tier:        tier,
		Description: aws.String(fmt.Sprintf("TLS certificate and key of Dask cluster %s (gateway %s)", spec.Name, p.cfg.GatewayID)),
		Tags:        ssmTags(p.memberTags(spec.Name, "", spec.Owner)),
	}
	if p.cfg.ParameterKMSKey != "" {
		in.KeyId = aws.String(p.cfg.ParameterKMSKey)
	}
	_, err := call(ctx, p, "PutParameter", func(ctx context.Context) (*ssm.PutParameterOutput, error) {
		return p.ssm.PutParameter(ctx, in)
	})
	if awsutil.ErrorCode(err) == codeParameterExists {
		in.Overwrite, in.Tags = aws.Bool(true), nil
		_, err = call(ctx, p, "PutParameter", func(ctx context.Context) (*ssm.PutParameterOutput, error) {
			return p.ssm.PutParameter(ctx, in)
		})
	}
	if err != nil {
		return p.apiError("PutParameter "+name, err)
	}
	crashpoint.Hit(ctx, pointParameterPut)
	p.mu.Lock()
	p.secrets[spec.Name] = true
	p.mu.Unlock()
	return nil
}

// deleteSecret removes the cluster's TLS parameter; one already gone is
// fine.
func (p *Provider) deleteSecret(ctx context.Context, cluster string) error {
	name := p.parameterName(cluster)
	_, err := call(ctx, p, "DeleteParameter", func(ctx context.Context) (*ssm.DeleteParameterOutput, error) {
		return p.ssm.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
	if err != nil && awsutil.ErrorCode(err) != codeParameterNotFound {
		return p.apiError("DeleteParameter "+name, err)
	}
	if err == nil {
		crashpoint.Hit(ctx, pointClusterParameterDeleted)
	}
	return nil
}

// ssmUnsafe matches what SSM refuses in tags (EC2 takes any character):
// an owner named O'Brien must not make the cluster fail to start.
var ssmUnsafe = regexp.MustCompile(`[^\p{L}\p{Z}\p{N}_.:/=+\-@]`)

func ssmTags(m map[string]string) []ssmtypes.Tag {
	var out []ssmtypes.Tag
	for _, t := range ec2Tags(m) {
		out = append(out, ssmtypes.Tag{Key: t.Key, Value: aws.String(ssmUnsafe.ReplaceAllString(aws.ToString(t.Value), "_"))})
	}
	return out
}

// errArchitecture marks an instance type the configured AMI cannot boot:
// the launch skips that type rather than failing.
var errArchitecture = errors.New("no usable image for the instance type's architecture")

// image returns the AMI and its root device name for an instance type:
// the configured AMI, or the one the SSM parameter for the type's
// architecture (and GPUs) names.
func (p *Provider) image(ctx context.Context, instanceType string, m providers.Machine) (ami, rootDevice string, err error) {
	arch := p.architecture(instanceType)
	gpu := m.GPUs > 0 || p.hasGPUs(instanceType)
	ami = p.cfg.AMI
	if ami == "" {
		param := p.cfg.AMIParameter
		switch {
		case gpu && arch == "arm64":
			return "", "", fmt.Errorf("%w: there is no default GPU image for arm64 types such as %s (set providers.ec2.ami to an image with the NVIDIA driver and container toolkit, or allow x86_64 GPU types)", errArchitecture, instanceType)
		case gpu:
			param = p.cfg.AMIParameterGPU
		case arch == "arm64":
			param = p.cfg.AMIParameterARM64
		}
		if ami, err = p.resolveParameter(ctx, param); err != nil {
			return "", "", err
		}
	}
	info, err := p.describeImage(ctx, ami)
	if err != nil {
		return "", "", err
	}
	if info.arch != "" && info.arch != arch {
		return "", "", fmt.Errorf("%w: image %s is %s, %s is %s", errArchitecture, ami, info.arch, instanceType, arch)
	}
	return ami, info.rootDevice, nil
}

// resolveParameter reads an AMI id from an SSM parameter, cached for
// CacheTTL: the public parameters change when AWS publishes a new image,
// a few times a month.
func (p *Provider) resolveParameter(ctx context.Context, name string) (string, error) {
	p.mu.Lock()
	c, ok := p.amis[name]
	p.mu.Unlock()
	if ok && time.Now().Before(c.expires) {
		return c.v, nil
	}
	out, err := call(ctx, p, "GetParameter", func(ctx context.Context) (*ssm.GetParameterOutput, error) {
		return p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	})
	switch {
	case awsutil.ErrorCode(err) == codeParameterNotFound:
		return "", fmt.Errorf("ec2 provider: the AMI parameter %s does not exist in %s (ParameterNotFound); set providers.ec2.ami to an image id there: %w", name, p.cfg.Region, err)
	case err != nil:
		return "", p.apiError("GetParameter "+name, err)
	}
	ami := ""
	if out.Parameter != nil {
		ami = strings.TrimSpace(aws.ToString(out.Parameter.Value))
	}
	if !reAMI.MatchString(ami) {
		return "", fmt.Errorf("ec2 provider: the AMI parameter %s holds %q, not an image id; set providers.ec2.ami to an image id", name, truncate(ami, 80))
	}
	p.mu.Lock()
	p.amis[name] = cached[string]{v: ami, expires: time.Now().Add(p.cfg.CacheTTL)}
	p.mu.Unlock()
	return ami, nil
}

type imageInfo struct{ arch, rootDevice string }

// describeImage looks up an AMI's root device name, which the block
// device mapping must name to resize the root volume (a different name
// would attach a second, empty volume instead), and its architecture.
// Images do not change: the answer is kept for the process's life.
func (p *Provider) describeImage(ctx context.Context, ami string) (imageInfo, error) {
	p.mu.Lock()
	info, ok := p.images[ami]
	p.mu.Unlock()
	if ok {
		return info, nil
	}
	out, err := call(ctx, p, "DescribeImages", func(ctx context.Context) (*awsec2.DescribeImagesOutput, error) {
		return p.ec2.DescribeImages(ctx, &awsec2.DescribeImagesInput{ImageIds: []string{ami}})
	})
	if err != nil && !strings.HasPrefix(awsutil.ErrorCode(err), "InvalidAMIID") {
		return imageInfo{}, p.apiError("DescribeImages", err)
	}
	if err != nil || len(out.Images) == 0 {
		return imageInfo{}, fmt.Errorf("ec2 provider: image %s does not exist in %s or is not shared with this account; set providers.ec2.ami to an image available there", ami, p.cfg.Region)
	}
	img := out.Images[0]
	info = imageInfo{arch: string(img.Architecture), rootDevice: orDefault(aws.ToString(img.RootDeviceName), "/dev/xvda")}
	p.mu.Lock()
	p.images[ami] = info
	p.mu.Unlock()
	return info, nil
}
