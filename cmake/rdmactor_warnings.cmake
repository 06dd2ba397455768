# rdmactor_warnings(target): our warning set, applied to our own targets only.
function(rdmactor_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         -Wno-unused-parameter)
endfunction()
