"""placeholder"""
class ResourceKind: pass
class ResourceManifest: pass
class PlacementManifest: pass
class RuntimeBindingManifest: pass
