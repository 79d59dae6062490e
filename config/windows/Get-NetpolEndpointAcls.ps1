<#
.SYNOPSIS
Writes every HCN endpoint of this Windows node with its complete policy list, as HNS returns it,
and the HNS networks those endpoints are on with their policies (the IP sets, SetPolicy, that
ACLs name), in the JSON form `netpol acls --compare` reads (format netpol.endpoint-acls/v1).

.DESCRIPTION
Reads HNS the way the netpol agent does: HcnEnumerateEndpoints, HcnOpenEndpoint,
HcnQueryEndpointProperties and HcnCloseEndpoint from computenetwork.dll, and the HNS version from
HNSCall GET /globals/version in vmcompute.dll. So the file holds what the agent would read: netpol's
ACLs (Id netpol-...) and every other owner's policies (the CNI plugin's OutBoundNAT, SDNRoute and
ACLs, kube-proxy's, ...), each as HNS returns it.

Read only: it changes nothing on the node. Run it elevated (Administrator, or SYSTEM in a
HostProcess container). Windows PowerShell 5.1 or PowerShell 7.

Then, where kubectl and netpol run:
  kubectl get pods,namespaces,nodes,networkpolicies -A -o yaml > cluster.yaml
  netpol acls -f cluster.yaml --compare live.json
exits 0 when every endpoint holds exactly the netpol rules netpol computes for its pod, 1 when
some rule is missing, altered or extra (each is listed), 2 when an input cannot be read.

.PARAMETER OutFile
Where to write the JSON (UTF-8 without a byte-order mark). Default: standard output.

.PARAMETER NodeName
The Kubernetes node name recorded in the file. Default: this computer's name in lower case.

.EXAMPLE
.\Get-NetpolEndpointAcls.ps1 -OutFile C:\k\live.json
#>
[CmdletBinding()]
param(
    [string] $OutFile,
    [string] $NodeName = $env:COMPUTERNAME.ToLowerInvariant()
)

Set-StrictMode -Version 3
$ErrorActionPreference = 'Stop'

# Windows PowerShell 5.1 serializes arrays with an extra Count property unless this type data
# goes; PowerShell 7 has none to remove.
Remove-TypeData -TypeName System.Array -ErrorAction SilentlyContinue

if (-not ('NetpolHcn.Native' -as [type])) {
    Add-Type -Namespace NetpolHcn -Name Native -MemberDefinition @'
[DllImport("computenetwork.dll", CharSet = CharSet.Unicode)]
public static extern int HcnEnumerateEndpoints(string query, out IntPtr endpoints, out IntPtr errorRecord);
[DllImport("computenetwork.dll")]
public static extern int HcnOpenEndpoint(ref Guid id, out IntPtr endpoint, out IntPtr errorRecord);
[DllImport("computenetwork.dll", CharSet = CharSet.Unicode)]
public static extern int HcnQueryEndpointProperties(IntPtr endpoint, string query, out IntPtr properties, out IntPtr errorRecord);
[DllImport("computenetwork.dll")]
public static extern int HcnCloseEndpoint(IntPtr endpoint);
[DllImport("computenetwork.dll")]
public static extern int HcnOpenNetwork(ref Guid id, out IntPtr network, out IntPtr errorRecord);
[DllImport("computenetwork.dll", CharSet = CharSet.Unicode)]
public static extern int HcnQueryNetworkProperties(IntPtr network, string query, out IntPtr properties, out IntPtr errorRecord);
[DllImport("computenetwork.dll")]
public static extern int HcnCloseNetwork(IntPtr network);
[DllImport("vmcompute.dll", CharSet = CharSet.Unicode)]
public static extern int HNSCall(string method, string path, string request, out IntPtr response);
'@
}

# Reads a string HCN allocated and frees it (CoTaskMemFree), as the agent does.
function Receive-HcnString([IntPtr] $Pointer) {
    if ($Pointer -eq [IntPtr]::Zero) { return $null }
    try { return [Runtime.InteropServices.Marshal]::PtrToStringUni($Pointer) }
    finally { [Runtime.InteropServices.Marshal]::FreeCoTaskMem($Pointer) }
}

function Assert-Hcn([string] $Call, [int] $Result, [string] $Record) {
    if ($Result -lt 0) {
        throw ('{0} failed: 0x{1:X8} {2}' -f $Call, $Result, $Record)
    }
}

function Get-HnsVersion {
    $response = [IntPtr]::Zero
    $result = [NetpolHcn.Native]::HNSCall('GET', '/globals/version', '', [ref] $response)
    $text = Receive-HcnString $response
    Assert-Hcn 'HNSCall GET /globals/version' $result $text
    $reply = $text | ConvertFrom-Json
    if (-not $reply.Success) { throw "HNS refused the version query: $text" }
    return '{0}.{1}' -f $reply.Output.Major, $reply.Output.Minor
}

# The V2 schema, no filter: every endpoint, as the agent lists them.
$query = '{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0}'

function Get-EndpointProperties([string] $Id) {
    $guid = [Guid] $Id
    $handle = [IntPtr]::Zero
    $record = [IntPtr]::Zero
    $result = [NetpolHcn.Native]::HcnOpenEndpoint([ref] $guid, [ref] $handle, [ref] $record)
    Assert-Hcn "HcnOpenEndpoint $Id" $result (Receive-HcnString $record)
    try {
        $properties = [IntPtr]::Zero
        $record = [IntPtr]::Zero
        $result = [NetpolHcn.Native]::HcnQueryEndpointProperties($handle, $query, [ref] $properties, [ref] $record)
        $text = Receive-HcnString $properties
        Assert-Hcn "HcnQueryEndpointProperties $Id" $result (Receive-HcnString $record)
        return $text | ConvertFrom-Json
    }
    finally {
        [void] [NetpolHcn.Native]::HcnCloseEndpoint($handle)
    }
}

# A network's properties (its policies hold the IP sets), as the agent reads them.
function Get-NetworkProperties([string] $Id) {
    $guid = [Guid] $Id
    $handle = [IntPtr]::Zero
    $record = [IntPtr]::Zero
    $result = [NetpolHcn.Native]::HcnOpenNetwork([ref] $guid, [ref] $handle, [ref] $record)
    Assert-Hcn "HcnOpenNetwork $Id" $result (Receive-HcnString $record)
    try {
        $properties = [IntPtr]::Zero
        $record = [IntPtr]::Zero
        $result = [NetpolHcn.Native]::HcnQueryNetworkProperties($handle, $query, [ref] $properties, [ref] $record)
        $text = Receive-HcnString $properties
        Assert-Hcn "HcnQueryNetworkProperties $Id" $result (Receive-HcnString $record)
        return $text | ConvertFrom-Json
    }
    finally {
        [void] [NetpolHcn.Native]::HcnCloseNetwork($handle)
    }
}

function Get-Property($Object, [string] $Name) {
    $property = $Object.PSObject.Properties[$Name]
    if ($property) { return $property.Value }
    return $null
}

$ids = [IntPtr]::Zero
$record = [IntPtr]::Zero
$result = [NetpolHcn.Native]::HcnEnumerateEndpoints($query, [ref] $ids, [ref] $record)
$idsText = Receive-HcnString $ids
Assert-Hcn 'HcnEnumerateEndpoints' $result (Receive-HcnString $record)

$endpoints = New-Object System.Collections.ArrayList
if ($idsText) {
    foreach ($id in ($idsText | ConvertFrom-Json)) {
        try {
            $properties = Get-EndpointProperties $id
        }
        catch {
            # Deleted since the enumeration, or unreadable: the agent skips it too.
            Write-Warning "endpoint ${id}: $_"
            continue
        }
        $addresses = @(
            foreach ($config in @(Get-Property $properties 'IpConfigurations')) {
                if ($config) { Get-Property $config 'IpAddress' }
            }
        ) | Where-Object { $_ }
        $network = [string] (Get-Property $properties 'HostComputeNetwork')
        [void] $endpoints.Add([ordered] @{
            id        = [string] (Get-Property $properties 'ID')
            name      = [string] (Get-Property $properties 'Name')
            network   = $network
            addresses = @($addresses)
            policies  = @(Get-Property $properties 'Policies' | Where-Object { $null -ne $_ })
        })
    }
}

# Every network an endpoint is on, with its policies: netpol's ACLs name its IP sets there.
$networks = New-Object System.Collections.ArrayList
$networkIds = @($endpoints | ForEach-Object { $_.network } | Where-Object { $_ } | Sort-Object -Unique)
foreach ($networkId in $networkIds) {
    try {
        $properties = Get-NetworkProperties $networkId
    }
    catch {
        Write-Warning "network ${networkId}: $_"
        continue
    }
    [void] $networks.Add([ordered] @{
        id       = $networkId
        name     = [string] (Get-Property $properties 'Name')
        policies = @(Get-Property $properties 'Policies' | Where-Object { $null -ne $_ })
    })
}

$document = [ordered] @{
    format      = 'netpol.endpoint-acls/v1'
    source      = 'hns'
    node        = $NodeName
    captured_at = (Get-Date).ToUniversalTime().ToString('o')
    hns_version = Get-HnsVersion
    endpoints   = @($endpoints.ToArray())
    networks    = @($networks.ToArray())
}
$json = ConvertTo-Json -InputObject $document -Depth 32

if ($OutFile) {
    $path = $ExecutionContext.SessionState.Path.GetUnresolvedProviderPathFromPSPath($OutFile)
    [IO.File]::WriteAllText($path, $json, (New-Object System.Text.UTF8Encoding $false))
    Write-Host ('{0} endpoints written to {1}' -f $endpoints.Count, $path)
}
else {
    $json
}
