"""Network component: VPC, private node subnets across AZs, public subnets for the load balancer only,
one NAT gateway for egress, and the security groups (LB -> engine ports, EFA self-traffic; no SSH).

Creates resources from the plan's ports and the layout; makes no sizing decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infragen.provision.aws.layout import AZ_COUNT, head_reservation, subnet_cidrs

ANYWHERE_IPV4 = "0.0.0.0/0"


@dataclass(frozen=True)
class NetworkArgs:
    """What the network needs to know."""

    vpc_cidr: str
    """Address space of the VPC."""
    listener_ports: tuple[int, ...]
    """Ports the load balancer listens on (80, and 443 with a certificate)."""
    target_ports: tuple[int, ...]
    """Engine ports on the nodes the load balancer may reach."""
    allowed_cidrs: tuple[str, ...]
    """Client networks allowed to reach the listener ports."""
    efa: bool
    """Create the self-referencing all-traffic group EFA requires."""
    node_zone_ids: list[str]
    """Zone id of each private (node) subnet: zones that offer the instance type (zones.resolve_zones)."""
    lb_zone_ids: list[str]
    """Zone id of each public (load-balancer) subnet, all distinct."""
    reserve_head_ips: bool
    """Reserve each private subnet's head block (multi-node replicas claim fixed addresses from it)."""
    tags: dict[str, str]
    """Tags for every resource (plan digest included)."""


class Network(pulumi.ComponentResource):
    """VPC with private node subnets, public LB subnets, NAT egress and security groups."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("infragen:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = args.tags
        cidrs = subnet_cidrs(args.vpc_cidr)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        # Zones by offering, chosen before any resource (zones.resolve_zones): a zone without the type would leave
        # its nodes unlaunchable.
        self.node_zone_ids = list(args.node_zone_ids)

        self.vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.vpc_cidr, enable_dns_hostnames=True,
                               enable_dns_support=True, tags={**tags, "Name": f"{name}-vpc"}, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags=tags, opts=child)

        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=self.vpc.id, tags=tags, opts=child)
        aws.ec2.Route(f"{name}-public-default", route_table_id=public_rt.id, destination_cidr_block=ANYWHERE_IPV4,
                      gateway_id=igw.id, opts=child)
        self.public_subnets: list[aws.ec2.Subnet] = []
        self.private_subnets: list[aws.ec2.Subnet] = []
        for i in range(AZ_COUNT):
            az = args.lb_zone_ids[i]
            pub = aws.ec2.Subnet(f"{name}-public-{i}", vpc_id=self.vpc.id, cidr_block=cidrs.public[i],
                                 availability_zone_id=az, map_public_ip_on_launch=False,
                                 tags={**tags, "Name": f"{name}-public-{i}", "infragen:tier": "public"}, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-public-{i}", subnet_id=pub.id, route_table_id=public_rt.id,
                                          opts=child)
            self.public_subnets.append(pub)

        # One NAT gateway (in the first public subnet) gives the nodes egress for packages and weights.
        eip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags=tags, opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id, subnet_id=self.public_subnets[0].id,
                                 tags=tags, opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
        private_rt = aws.ec2.RouteTable(f"{name}-private-rt", vpc_id=self.vpc.id, tags=tags, opts=child)
        aws.ec2.Route(f"{name}-private-default", route_table_id=private_rt.id, destination_cidr_block=ANYWHERE_IPV4,
                      nat_gateway_id=nat.id, opts=child)
        # S3 through a gateway endpoint, not the NAT gateway: free, and NAT bills every GB it processes (weights
        # from S3 are tens to hundreds of GB per node). AWS names the service; only same-region S3 goes this way.
        s3 = aws.ec2.get_vpc_endpoint_service_output(service="s3", service_type="Gateway", opts=invoke)
        self.s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3", vpc_id=self.vpc.id, service_name=s3.service_name, vpc_endpoint_type="Gateway",
            route_table_ids=[private_rt.id], tags={**tags, "Name": f"{name}-s3"}, opts=child)
        for i in range(AZ_COUNT):
            az = args.node_zone_ids[i]
            priv = aws.ec2.Subnet(f"{name}-private-{i}", vpc_id=self.vpc.id, cidr_block=cidrs.private[i],
                                  availability_zone_id=az, map_public_ip_on_launch=False,
                                  tags={**tags, "Name": f"{name}-private-{i}", "infragen:tier": "private"},
                                  opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-private-{i}", subnet_id=priv.id, route_table_id=private_rt.id,
                                          opts=child)
            self.private_subnets.append(priv)
            if args.reserve_head_ips:
                aws.ec2.SubnetCidrReservation(f"{name}-heads-{i}", subnet_id=priv.id, reservation_type="explicit",
                                              cidr_block=head_reservation(cidrs.private[i]),
                                              description="infragen: fixed addresses of multi-node heads",
                                              opts=child)
        self.private_cidrs = cidrs.private

        # Load balancer: clients in, engine ports out to the nodes only.
        self.lb_sg = aws.ec2.SecurityGroup(f"{name}-lb-sg", vpc_id=self.vpc.id,
                                           description="infragen load balancer: listener ports from clients",
                                           tags=tags, opts=child)
        self.node_sg = aws.ec2.SecurityGroup(f"{name}-node-sg", vpc_id=self.vpc.id,
                                             description="infragen nodes: engine ports from the load balancer only",
                                             tags=tags, opts=child)
        for port in args.listener_ports:
            for j, cidr in enumerate(args.allowed_cidrs):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-lb-in-{port}-{j}", security_group_id=self.lb_sg.id, ip_protocol="tcp",
                    from_port=port, to_port=port, cidr_ipv4=cidr, description=f"clients to listener {port}",
                    tags=tags, opts=child)
        for port in args.target_ports:
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-lb-out-{port}", security_group_id=self.lb_sg.id, ip_protocol="tcp", from_port=port,
                to_port=port, referenced_security_group_id=self.node_sg.id,
                description=f"load balancer to engine port {port}", tags=tags, opts=child)
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-node-in-{port}", security_group_id=self.node_sg.id, ip_protocol="tcp", from_port=port,
                to_port=port, referenced_security_group_id=self.lb_sg.id,
                description=f"engine port {port} from the load balancer (traffic and health checks)",
                tags=tags, opts=child)
        # Egress through the NAT gateway: packages, container images, model weights, Secrets Manager, SSM.
        aws.vpc.SecurityGroupEgressRule(f"{name}-node-out", security_group_id=self.node_sg.id, ip_protocol="-1",
                                        cidr_ipv4=ANYWHERE_IPV4, description="egress via NAT", tags=tags,
                                        opts=child)

        self.efa_sg: aws.ec2.SecurityGroup | None = None
        if args.efa:
            # EFA's OS-bypass traffic needs a group allowing all traffic to and from itself (EC2 guide, EFA step 1);
            # it also carries the head/worker control traffic (Ray, NCCL bootstrap) between a replica's nodes.
            self.efa_sg = aws.ec2.SecurityGroup(f"{name}-efa-sg", vpc_id=self.vpc.id,
                                                description="infragen EFA: all traffic within the group",
                                                tags=tags, opts=child)
            aws.vpc.SecurityGroupIngressRule(f"{name}-efa-in", security_group_id=self.efa_sg.id, ip_protocol="-1",
                                             referenced_security_group_id=self.efa_sg.id,
                                             description="EFA self ingress", tags=tags, opts=child)
            aws.vpc.SecurityGroupEgressRule(f"{name}-efa-out", security_group_id=self.efa_sg.id, ip_protocol="-1",
                                            referenced_security_group_id=self.efa_sg.id,
                                            description="EFA self egress", tags=tags, opts=child)

        self.availability_zones = [s.availability_zone for s in self.private_subnets]
        self.register_outputs({
            "vpc_id": self.vpc.id,
            "private_subnet_ids": [s.id for s in self.private_subnets],
            "public_subnet_ids": [s.id for s in self.public_subnets],
            "lb_security_group_id": self.lb_sg.id,
            "node_security_group_id": self.node_sg.id,
        })
