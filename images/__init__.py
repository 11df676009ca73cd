"""Container image build tool: debootstrap base, layered role images, no registry needed."""
